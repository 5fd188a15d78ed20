"""Uneven shards: a dimension that does not divide over its mesh axes is padded, as torch_xla pads
it. Values stay CPU's through ops, in-place writes, autograd and the loader; the buffer is the
padded one, every shard one shape; the sharding is kept through a sync and an in-place write."""

import numpy as np
import torch
import torch.nn as nn

import xlanb
import xlanb.spmd as xs
from common import compiles, report
from xlanb.capture.tensor import base_node

mesh = xs.Mesh(range(8), (2, 4), ("data", "model"))
out = {}


def layout(t):
    buf = base_node(t).buffer
    return {"buffer": list(buf.shape), "shards": sorted({tuple(s.data.shape) for s in buf.addressable_shards}),
            "spec": xs.sharding_spec(t)}


# a computed tensor: 9 rows over 4 devices -> 3 rows each, the last device holds padding only
w_cpu = torch.randn(9, 6)
w = w_cpu.to("xla")
xs.mark_sharding(w, mesh, ("model", None))
out["computed"] = layout(w)
out["computed_value"] = bool(torch.equal(w.cpu(), w_cpu))
buf = np.asarray(base_node(w).buffer)
out["padding_zero"] = bool((buf[9:] == 0).all())
out["picture_devices"] = sorted({d for line in xs.visualize_sharding(w).splitlines() for d in range(8)
                                 if f"dev {d}" in line or f",{d}" in line})

# ops on it, mixed with a tensor on one device, give CPU's values
x_cpu = torch.randn(5, 9)
x = x_cpu.to("xla")
out["matmul"] = float(((x @ w).cpu() - x_cpu @ w_cpu).abs().max())
out["rows"] = bool(torch.equal((w[7:] * 2).cpu(), w_cpu[7:] * 2))
out["sum"] = float((w.sum(0).cpu() - w_cpu.sum(0)).abs().max())

# an in-place write keeps the sharding (and the padding) through a sync
w.add_(1)
xlanb.sync()
w_cpu.add_(1)
out["inplace"] = layout(w)
out["inplace_value"] = bool(torch.equal(w.cpu(), w_cpu))

# a pending tensor constrained unevenly leaves its graph padded
p = (w * 3)[:, :5].clone()
xs.mark_sharding(p, mesh, ("data", "model"))          # 9 over 2, 5 over 4
xlanb.sync()
out["pending"] = layout(p)
out["pending_value"] = bool(torch.equal(p.cpu(), (w_cpu * 3)[:, :5]))

# the same step again compiles nothing
before = compiles()
for _ in range(2):
    (x @ w).sum().cpu()
out["recompiles"] = compiles() - before - 1           # the first of the two compiles once

# autograd through an unevenly sharded parameter
torch.manual_seed(0)
lin_cpu = nn.Linear(6, 10)
lin = nn.Linear(6, 10).to("xla")
lin.load_state_dict(lin_cpu.state_dict())
xs.mark_sharding(lin.weight, mesh, ("model", None))   # 10 over 4
inp = torch.randn(3, 6)
lin(inp.to("xla")).pow(2).sum().backward()
lin_cpu(inp).pow(2).sum().backward()
out["grad"] = float((lin.weight.grad.cpu() - lin_cpu.weight.grad).abs().max())
out["bias_grad"] = float((lin.bias.grad.cpu() - lin_cpu.bias.grad).abs().max())

# a short batch from the loader: 5 samples over data=2
batch = torch.randn(5, 3)
(got,) = list(xlanb.DeviceLoader([batch], mesh=mesh))
out["loader"] = layout(got)
out["loader_value"] = bool(torch.equal(got.cpu(), batch))

# back to one device
xs.clear_sharding(w)
out["cleared"] = layout(w)["buffer"]
out["cleared_value"] = bool(torch.equal(w.cpu(), w_cpu))
report(**out)
