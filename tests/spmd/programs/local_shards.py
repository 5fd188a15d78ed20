"""set_local_shards: a sharded tensor's data replaced tile by tile, its sharding kept; and a Mesh
subclass (xlanb.compat's torch_xla Mesh) accepted as a plain Mesh."""

import json

import numpy as np
import torch

import xlanb
import xlanb.spmd as xs
from xlanb.spmd import api

out = {}
mesh = xs.Mesh(np.arange(8), (2, 4), ("data", "model"))
t = torch.arange(32.0).reshape(4, 8).to("xla")
xs.mark_sharding(t, mesh, ("data", "model"))
tiles = [np.full((2, 2), i, dtype=np.float32) for i in range(8)]
api.set_local_shards(t, tiles)
out["value"] = t.cpu().tolist()
out["sharding"] = xs.sharding_spec(t)
errors = []
for bad in (tiles[:-1], [np.zeros((4, 2), np.float32)] * 8):
    try:
        api.set_local_shards(t, bad)
    except RuntimeError as e:
        errors.append(str(e).split(":")[0])
r = torch.ones(4, 8).to("xla")
xs.mark_sharding(r, mesh, (None, None))
try:
    api.set_local_shards(r, tiles)
except RuntimeError as e:
    errors.append(str(e).split(":")[0])
out["errors"] = errors


class Named(xs.Mesh):
    """A subclass that shows no axis names (as torch_xla's unnamed Mesh does)."""

    def __init__(self, ids, shape):
        super().__init__(ids, shape)
        self.axis_names = None


u = torch.zeros(8, 4).to("xla")
xs.mark_sharding(u, Named(np.arange(8), (8,)), ("axis_0", None))
out["subclass"] = xs.sharding_spec(u)
print("RESULT " + json.dumps(out))
