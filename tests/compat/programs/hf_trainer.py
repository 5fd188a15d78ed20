"""transformers' Trainer on a tiny model: with `--xla` the compat layer is installed first, so the
Trainer takes its torch_xla path (accelerate's XLA state, xm.optimizer_step, mark_step, metrics);
without it, the same Trainer on torch CPU. Prints the logged losses."""

import json
import sys

if "--xla" in sys.argv:
    import xlanb.compat
    xlanb.compat.install()

import torch  # noqa: E402
from torch import nn  # noqa: E402
from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: E402

XLA = "--xla" in sys.argv


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))

    def forward(self, x, labels=None):
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


class Data(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.x, self.y = torch.randn(64, 8, generator=g), torch.randint(0, 2, (64,), generator=g)

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


losses = []


class KeepLosses(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            losses.append(float(logs["loss"]))


# dataloader_pin_memory=False: pinning for the xla device is not provided (docs/torch_xla.md)
args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=8, num_train_epochs=1, logging_steps=1,
                         report_to=[], save_strategy="no", learning_rate=0.1, use_cpu=not XLA,
                         dataloader_drop_last=True, seed=0, lr_scheduler_type="constant", dataloader_pin_memory=False)
trainer = Trainer(model=Tiny(), args=args, train_dataset=Data(), callbacks=[KeepLosses()])
trainer.train()
print("RESULT " + json.dumps({"device": str(args.device), "losses": losses}))
