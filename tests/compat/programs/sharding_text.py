"""Run on 8 CPU devices with the compat layer: torch_xla's sharding text and XLAShardedTensor."""

import json

import numpy as np
import torch

import xlanb.compat

xlanb.compat.install()

import torch_xla  # noqa: E402
import torch_xla.distributed.parallel_loader as pl  # noqa: E402
import torch_xla.distributed.spmd as xs  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402

n = xr.global_runtime_device_count()
ids = np.arange(n)
out = {"devices": n}
mesh1 = xs.Mesh(ids, (n,), ("data",))
mesh2 = xs.Mesh(ids, (2, n // 2), ("x", "y"))

t = torch.randn(16, 8).to("xla")
xt = xs.mark_sharding(t, xs.Mesh(ids, (1, n)), (0, 1))
out["1x8"] = torch_xla._XLAC._get_xla_sharding_spec(t)
out["xt_spec"] = xt.sharding_spec
out["xt_type"] = int(xt.sharding_type)
out["xt_is_t"] = xt.global_tensor is t
out["shards"] = [[s.shard_device, [[i.start, i.stop] for i in s.indices], s.replica_id, list(s.data.shape)]
                 for s in xt.local_shards]
out["shards_equal"] = bool(torch.equal(torch.cat([s.data for s in xt.local_shards], dim=1), t.cpu()))

# an XLAShardedTensor computes as its tensor; results stay XLAShardedTensors, in-place ops write the tensor
plus = xt + 1
out["ops"] = [type(plus).__name__, type(torch.relu(xt)).__name__,
              bool(torch.allclose(plus.cpu(), t.cpu() + 1)), bool(torch.allclose((xt * xt).cpu(), t.cpu() ** 2))]
before = t.cpu()
xt += 2
out["inplace"] = bool(torch.allclose(t.cpu(), before + 2)) and xt.global_tensor is t

v = torch.arange(16.0).to("xla")
xs.mark_sharding(v, mesh1, ("data",))
out["1d"] = torch_xla._XLAC._get_xla_sharding_spec(v)
flipped = torch.zeros(8, 16).to("xla")
xs.mark_sharding(flipped, xs.Mesh(np.flip(ids), (1, n)), (0, 1))
out["flipped"] = torch_xla._XLAC._get_xla_sharding_spec(flipped)

r = torch.ones(4, 4).to("xla")
xr_ = xs.mark_sharding(r, mesh2, (None, None))
out["replicated"] = torch_xla._XLAC._get_xla_sharding_spec(r)
out["replicated_type"] = int(xr_.sharding_type)
out["replicated_indices"] = [s.indices is Ellipsis for s in xr_.local_shards]

p = torch.ones(16, 16).to("xla")
xp_ = xs.mark_sharding(p, mesh2, ("x", None))
out["partial"] = torch_xla._XLAC._get_xla_sharding_spec(p)
out["partial_type"] = int(xp_.sharding_type)
q = torch.ones(16, 16).to("xla")
xs.mark_sharding(q, mesh2, (None, ("y", "x")))
out["tupled"] = torch_xla._XLAC._get_xla_sharding_spec(q)

# a pending tensor's sharding after propagation
w = (t * 2).sum(dim=1, keepdim=True) + 0.5
out["pending_value"] = bool(torch.allclose(w.cpu(), (t.cpu() * 2).sum(dim=1, keepdim=True) + 0.5))

import contextlib, io  # noqa: E401,E402
with contextlib.redirect_stdout(io.StringIO()) as printed:
    shown = xs.visualize_sharding(v)
out["visual"] = [shown, printed.getvalue()]
xs.clear_sharding(t)
out["cleared"] = torch_xla._XLAC._get_xla_sharding_spec(t)
out["global_mesh_none"] = xs.get_global_mesh() is None
xs.set_global_mesh(mesh2)
out["global_mesh"] = xs.get_global_mesh() is mesh2
out["1d_mesh"] = [xs.get_1d_mesh("data").axis_names, xs.get_1d_mesh().axis_names, xs.get_1d_mesh().size()]

batches = [torch.arange(32.0).reshape(16, 2) + i for i in range(2)]
loader = pl.MpDeviceLoader(batches, torch_xla.device(), input_sharding=xs.ShardingSpec(mesh1, ("data", None)))
out["loader"] = [torch_xla._XLAC._get_xla_sharding_spec(b) for b in loader]

# SpmdFullyShardedDataParallel trains as the unsharded model does
from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2  # noqa


def train(model, device):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(3)
    losses = []
    for _ in range(3):
        x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        losses.append(loss.item())
    return losses


def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


fsdp_mesh = xs.Mesh(ids, (n,), ("fsdp",))
wrapped = FSDPv2(make().to("xla"), mesh=fsdp_mesh)
out["fsdp_weight_spec"] = torch_xla._XLAC._get_xla_sharding_spec(wrapped.module[0].weight)
out["fsdp_losses"] = train(wrapped, "xla")
out["cpu_losses"] = train(make(), "cpu")

# uneven shards: 9 elements over 8 devices, padded to 2 each (torch_xla's local_shards)
u_cpu = torch.arange(9.0)
xu = xs.mark_sharding(u_cpu.to("xla"), mesh1, ("data",))
out["uneven_spec"] = xu.sharding_spec
out["uneven_shards"] = [[[[i.start, i.stop] for i in s.indices][0], s.data.tolist(), s.unpadded_data.tolist()]
                        for s in xu.local_shards]
out["uneven_value"] = bool(torch.equal((xu + 1).cpu(), u_cpu + 1))

# one sharding made per mesh and spec (torch_xla's CreateOpSharding counter)
import torch_xla.debug.metrics as met  # noqa: E402
met.clear_all()
counted = xs.Mesh(ids, (1, n))
made = []
for spec in ((0, 1), (0, 1), (0, None)):
    xs.mark_sharding(torch.zeros(1, n).to("xla"), counted, spec)
    made.append(met.counter_value("CreateOpSharding"))
out["op_shardings"] = made

# minibatch=True: each batch divides over this process's devices, or torch_xla's error
short = pl.MpDeviceLoader([torch.zeros(n - 1, 2)], torch_xla.device(),
                          input_sharding=xs.ShardingSpec(mesh1, ("data", None), minibatch=True))
try:
    next(iter(short))
    out["minibatch"] = "no error"
except RuntimeError as e:
    out["minibatch"] = str(e)
# manual sharding, as torch_xla's test_manual_sharding_e2e and test_manual_sharding_api_e2e run it (the
# global mesh is mesh2: 2 x 4)
x = torch.zeros(8, 8).to("xla")
mesh18 = xs.Mesh(ids, (1, n))
xt = xs.mark_sharding(x, mesh18, (0, 1))
xx = torch_xla._XLAC._spmd_full_to_shard_shape(xt.global_tensor)
manual = {"shard_shape": list(xx.shape), "spec": torch_xla._XLAC._get_xla_sharding_spec(xx + 1),
          "type": int(xs._mark_manual_sharding(xx + 1).sharding_type)}
xxx = torch_xla._XLAC._spmd_shard_to_full_shape(xs._mark_manual_sharding(xx + 1).global_tensor,
                                                mesh18.get_op_sharding((0, 1)), x.shape, x.dtype)
manual["e2e"] = [list(xxx.shape), bool(torch.equal(xxx.cpu(), torch.ones(8, 8)))]
ya = xs.enable_manual_sharding(torch.arange(64.0).reshape(8, 8).to("xla"), (0, 1))
yb = xs.disable_manual_sharding(ya * 2, (0, 1), (8, 8))
manual["api"] = [list(ya.shape), bool(torch.equal(yb.cpu(), torch.arange(64.0).reshape(8, 8) * 2)), yb.sharding_spec]
try:
    xs._mark_manual_sharding(torch.zeros(3, 2).to("xla"))
    manual["mark_device_data"] = "no error"
except RuntimeError as e:
    manual["mark_device_data"] = "RuntimeError"
out["manual"] = manual
print("RESULT " + json.dumps(out))
