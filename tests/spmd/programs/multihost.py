"""One of two processes (jax.distributed, CPU devices, gloo collectives), 4 devices each: data-parallel
training over the 8 global devices, against single-device training done on this process's device.

    python multihost.py PROCESS_ID PORT
"""

import sys

import xlanb
import xlanb.spmd as xs

process_id, port = int(sys.argv[1]), int(sys.argv[2])
xs.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)

import copy  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from common import max_diff, mlp, report  # noqa: E402

torch.manual_seed(0)                       # every process builds the same model and data
base = mlp()
batches = [(torch.randn(32, 16), torch.randint(0, 4, (32,))) for _ in range(4)]


def train(model, mesh):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in (xlanb.DeviceLoader(batches, mesh=mesh) if mesh is not None else batches):
        if mesh is None:
            x, y = x.to("xla"), y.to("xla")
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        xlanb.sync()
        losses.append(loss)
    return [float(l.item()) for l in losses]


mesh = xs.get_1d_mesh("data")
dp = xs.data_parallel(copy.deepcopy(base).to("xla"), mesh)
losses_dp = train(dp, mesh)
weights_dp = [p.detach().cpu() for p in dp.parameters()]
one = copy.deepcopy(base).to("xla")        # this process's first device alone
losses_one = train(one, None)
# a value sharded over both processes is gathered from both by .cpu()
spread = xs.mark_sharding(torch.arange(32.0).reshape(16, 2).to("xla"), mesh, ("data", None))
doubled = (spread * 2).cpu()
report(gathered=bool(torch.equal(doubled, torch.arange(32.0).reshape(16, 2) * 2)),
       spread_spec=xs.sharding_spec(spread), process=xs.process_index(), processes=xs.process_count(), devices=xs.global_device_count(),
       local_devices=len(__import__("jax").local_devices()), mesh=mesh.size(),
       loss_diff=max(abs(a - b) for a, b in zip(losses_one, losses_dp)),
       param_diff=max_diff(weights_dp, one.parameters()), losses=losses_dp,
       batch_spec=xs.sharding_spec(next(iter(xlanb.DeviceLoader(batches[:1], mesh=mesh)))[0]))
