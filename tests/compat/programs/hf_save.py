"""save_pretrained / from_pretrained of a tiny GPT-2 (tied embeddings) living on the xla device,
through the compat layer (transformers tells tied xla weights apart by _xla_get_tensor_id)."""

import json
import sys

import xlanb.compat

xlanb.compat.install()

import torch  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

torch.manual_seed(0)
config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config).to(xm.xla_device()).eval()
ids = torch.randint(0, 64, (2, 8))
loss = model(ids.to("xla"), labels=ids.to("xla")).loss.item()
model.save_pretrained(sys.argv[1])
back = GPT2LMHeadModel.from_pretrained(sys.argv[1]).eval()
same = all(torch.equal(a.detach().cpu(), b) for a, b in zip(model.state_dict().values(), back.state_dict().values()))
on_xla = GPT2LMHeadModel.from_pretrained(sys.argv[1]).to("xla").eval()
print("RESULT " + json.dumps({"same": same, "tied": back.lm_head.weight is back.transformer.wte.weight, "loss": loss,
                              "loss_cpu": back(ids, labels=ids).loss.item(),
                              "loss_xla": on_xla(ids.to("xla"), labels=ids.to("xla")).loss.item()}))
