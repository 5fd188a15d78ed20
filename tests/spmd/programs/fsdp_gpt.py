"""FSDP-style sharding of notebook 04's transformer over 8 devices: 5 AdamW steps against the
same steps on one device; no compile after step 2."""

import copy

import torch
import torch.nn.functional as F

import xlanb
import xlanb.spmd as xs
from common import TinyGPT, compiles, max_diff, report

torch.manual_seed(0)
base = TinyGPT()
batches = [torch.randint(0, 128, (8, 33)) for _ in range(5)]


def train(model, mesh):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    losses, compiled = [], []
    for data in batches:
        x, y = data[:, :-1].to("xla"), data[:, 1:].to("xla")
        if mesh is not None:
            xs.mark_sharding(x, mesh, ("fsdp", None))
            xs.mark_sharding(y, mesh, ("fsdp", None))
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        xlanb.sync()
        losses.append(loss)
        compiled.append(compiles())
    return [float(l.item()) for l in losses], compiled, opt


one = copy.deepcopy(base).to("xla")
losses_one, _, _ = train(one, None)

mesh = xs.get_1d_mesh("fsdp")
sharded = copy.deepcopy(base).to("xla")
plan = xs.fsdp_plan(sharded, mesh)
xs.fsdp(sharded, mesh)
losses_fsdp, compiled, opt = train(sharded, mesh)
params = dict(sharded.named_parameters())
state = opt.state[params["blocks.0.qkv.weight"]]
report(loss_diff=max(abs(a - b) for a, b in zip(losses_one, losses_fsdp)), losses=losses_fsdp,
       param_diff=max_diff(one.parameters(), sharded.parameters()),
       compiles=compiled, compiles_after_step2=compiled[-1] - compiled[1],
       sharded_params=sum(1 for s in plan.values() if any(s)), params=len(plan),
       qkv_plan=list(plan["blocks.0.qkv.weight"]),
       qkv_sharding=xs.sharding_spec(params["blocks.0.qkv.weight"]),
       exp_avg_sharding=xs.sharding_spec(state["exp_avg"]),
       tied=sharded.head.weight is sharded.tok.weight)
