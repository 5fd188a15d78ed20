"""Many programs with collectives launched back to back on 8 CPU devices, as eager mode launches
one per op of a data-parallel step (examples/eager/train_decoder_only_eager_spmd_data_parallel.py).
`x.T @ x` contracts over the sharded batch dimension, so each such program ends in an all-reduce.
Run with `python -m xlanb.compat mesh_collectives.py eager|lazy|cpu STEPS` and 8 CPU devices."""

import json
import sys

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

mode, steps = sys.argv[1], int(sys.argv[2])
device = torch.device("cpu") if mode == "cpu" else torch_xla.device()
torch_xla.experimental.eager_mode(mode == "eager")
torch.manual_seed(0)
x = torch.randn(8 * int(sys.argv[3]) if len(sys.argv) > 3 else 8 * 1024, 256).to(device)
w = torch.eye(256).to(device)
if mode != "cpu":
    n = xr.global_runtime_device_count()
    xs.mark_sharding(x, xs.Mesh(np.arange(n), (n,), ("data",)), ("data", None))
for step in range(steps):
    for i in range(4):
        w = (x.T @ x) / x.shape[0] * 0.5 + w * 0.5       # an all-reduce over the batch shards
        torch_xla.sync()
        x = x + 0.01 * torch.tanh(x @ w)
        torch_xla.sync()
print("RESULT " + json.dumps({"w": w.sum().item(), "x": x.abs().sum().item()}))
