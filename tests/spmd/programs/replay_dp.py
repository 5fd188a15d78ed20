"""A data-parallel MLP step over 8 devices through xlanb.compile(step, replay=True): equal to the
traced step; an argument sharded another way fails the sharding guard and traces."""

import copy

import torch
import torch.nn.functional as F

import xlanb
import xlanb.spmd as xs
from common import compiles, max_diff, mlp, report

torch.manual_seed(0)
base = mlp()
data = [(torch.randn(32, 16), torch.randint(0, 4, (32,))) for _ in range(6)]
mesh = xs.get_1d_mesh("data")


def train(replay: bool):
    model = xs.data_parallel(copy.deepcopy(base).to("xla"), mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    f = xlanb.compile(step, replay=replay)
    losses, compiled = [], []
    for x, y in data:
        x, y = x.to("xla"), y.to("xla")
        xs.mark_sharding(x, mesh, ("data", None))
        xs.mark_sharding(y, mesh, ("data",))
        xlanb.sync()
        losses.append(f(x, y))
        compiled.append(compiles())
    return model, f, [float(l.item()) for l in losses], compiled


traced, _, losses_traced, _ = train(False)
replayed, f, losses_replayed, compiled = train(True)
x, y = data[0][0].to("xla"), data[0][1].to("xla")
xs.mark_sharding(x, mesh, (None, None))                  # replicated: another sharding
xs.mark_sharding(y, mesh, ("data",))
xlanb.sync()
f(x, y)
misses = [e.reason for e in xlanb.runtime_state().log.all() if type(e).__name__ == "ReplayMiss"]
report(replayed=f.replayed, losses_equal=losses_traced == losses_replayed,
       param_diff=max_diff(traced.parameters(), replayed.parameters()),
       compiles_after_step2=compiled[-1] - compiled[1], misses=misses)
