"""Data-parallel MLP training over 8 devices against the same training on one device."""

import copy

import torch
import torch.nn.functional as F

import xlanb
import xlanb.spmd as xs
from common import compiles, max_diff, mlp, report

torch.manual_seed(0)
base = mlp()
data = [(torch.randn(32, 16), torch.randint(0, 4, (32,))) for _ in range(6)]


def train(model, shard):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses, compiled = [], []
    for x, y in data:
        x, y = x.to("xla"), y.to("xla")
        if shard is not None:
            xs.mark_sharding(x, shard, ("data", None))
            xs.mark_sharding(y, shard, ("data",))
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        xlanb.sync()
        losses.append(loss)
        compiled.append(compiles())
    return [float(l.item()) for l in losses], compiled


one = copy.deepcopy(base).to("xla")
losses_one, _ = train(one, None)

mesh = xs.get_1d_mesh("data")
dp = xs.data_parallel(copy.deepcopy(base).to("xla"), mesh)
losses_dp, compiled = train(dp, mesh)
weight = dict(dp.named_parameters())["0.weight"]
report(devices=mesh.size(), loss_diff=max(abs(a - b) for a, b in zip(losses_one, losses_dp)),
       param_diff=max_diff(one.parameters(), dp.parameters()), losses=losses_dp,
       compiles_after_step2=compiled[-1] - compiled[1],
       weight_sharding=xs.sharding_spec(weight), grad_none=all(p.grad is None for p in dp.parameters()))
