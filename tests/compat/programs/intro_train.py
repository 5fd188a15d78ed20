"""torch_xla's introduction training step, as its users write it (issue 24's example). Run with
`python -m xlanb.compat intro_train.py` (on xlanb) or with `--cpu` (the same script on torch CPU)."""

import json
import sys

import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

device = torch.device("cpu") if "--cpu" in sys.argv else xm.xla_device()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(5)]

losses = []
for step, (inputs, labels) in enumerate(data):
    inputs, labels = inputs.to(device), labels.to(device)
    opt.zero_grad()
    loss = loss_fn(model(inputs), labels)
    loss.backward()
    xm.optimizer_step(opt)
    xm.mark_step()
    xm.add_step_closure(lambda s=step, l=loss: losses.append((s, l.item())))
xm.mark_step()
compiles = met.metric_data("CompileTime")
print("RESULT " + json.dumps({"losses": [l for _, l in losses], "steps": [s for s, _ in losses],
                              "compiles": 0 if compiles is None else compiles[0],
                              "weight": model[0].weight.detach().cpu().sum().item()}))
