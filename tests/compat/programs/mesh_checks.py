"""Run on 8 CPU devices with the compat layer: torch_xla's Mesh checks, HybridMesh, tensors put
together from CPU shards, and the torch_xla metric names xlanb's events answer."""

import json
from unittest import mock

import numpy as np
import torch

import xlanb.compat

xlanb.compat.install()

import torch_xla  # noqa: E402
import torch_xla.debug.metrics as met  # noqa: E402
import torch_xla.distributed.spmd as xs  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402

n = xr.global_runtime_device_count()
out = {}


def error_of(*args):
    try:
        xs.Mesh(*args)
    except Exception as e:          # noqa: BLE001 -- the type is what is checked
        return [type(e).__name__, isinstance(e, AssertionError), isinstance(e, ValueError), str(e).split(":")[0]]
    return None


out["errors"] = {
    "subset": error_of(np.arange(4), (1, 4)),
    "names_length": error_of(np.arange(n), (1, n), ("a", "b", "c")),
    "names_repeat": error_of(np.arange(n), (1, n), ("a", "a")),
    "size": error_of(np.arange(n), (2, n)),
    "repeat_ids": error_of(np.zeros(n, dtype=int), (1, n)),
    "ids_too_big": error_of(np.arange(n) + 1, (1, n)),
}
unnamed = xs.Mesh(np.arange(n), (2, n // 2))
out["unnamed"] = [unnamed.axis_names, list(unnamed.shape().items()), unnamed.device_ids.tolist()]
t = torch.arange(16.0).reshape(2, 8).to("xla")
xs.mark_sharding(t, unnamed, (0, 1))
out["unnamed_spec"] = torch_xla._XLAC._get_xla_sharding_spec(t)

out["hybrid_cpu"] = xs.HybridMesh(ici_mesh_shape=(2, n // 2)).get_logical_mesh().tolist()
# two slices of four chips, listed out of physical order: each slice is laid out by coordinates
attributes = [{"name": f"TPU:{i}", "slice_index": i // 4, "core_on_chip": 0,
               "coords": [[1, 1, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0]][i % 4]} for i in range(8)]
with mock.patch("torch_xla.runtime.global_runtime_device_attributes", return_value=attributes), \
        mock.patch("torch_xla.core.xla_model.xla_device_hw", return_value="TPU"):
    hybrid = xs.HybridMesh(ici_mesh_shape=(1, 4), dcn_mesh_shape=(2, 1), axis_names=("dcn", "ici"))
out["hybrid_tpu"] = [hybrid.get_logical_mesh().tolist(), hybrid.axis_names]

from_shards = torch_xla._XLAC._global_tensor_from_cpu_shards
mesh1 = xs.Mesh(np.arange(n), (n,), ("data",))
shards = [torch.arange(2.0) + 2 * i for i in range(n)]
g = from_shards(shards, mesh1.get_op_sharding((0,)))
out["tiled"] = [g.cpu().tolist(), torch_xla._XLAC._get_xla_sharding_spec(g)]
g = from_shards(shards, mesh1.get_op_sharding(("data",)), torch.Size((12,)))
out["trimmed"] = [g.cpu().tolist(), torch_xla._XLAC._get_xla_sharding_spec(g)]
mesh2 = xs.Mesh(np.arange(n), (n // 2, 2), ("x", "y"))
g = from_shards([torch.tensor([[i % 2]]) for i in range(n)], mesh2.get_op_sharding((None, 1)))
out["partial"] = g.cpu().tolist()
g = from_shards([torch.tensor([7])] * n, mesh2.get_op_sharding((None, None)))
out["replicated"] = [g.cpu().tolist(), torch_xla._XLAC._get_xla_sharding_spec(g)]
bad = []
for args in ((shards[:-1], mesh1.get_op_sharding((0,))), (shards, mesh1.get_op_sharding((0,)), torch.Size((17,))),
             (shards, mesh1.get_op_sharding((0,)), torch.Size((8,))), (shards, mesh1.get_op_sharding((0,)), (2, 8))):
    try:
        from_shards(*args)
        bad.append(None)
    except RuntimeError as e:
        bad.append(str(e).split(":")[0])
out["bad_shards"] = bad

xt = xs.mark_sharding(torch.arange(16.0).to("xla"), mesh1, (0,))
shards = xt.local_shards
for s in shards:
    s.data *= -1
xt.load_local_shards_(shards)
out["loaded"] = [xt.global_tensor.cpu().tolist(), xt.sharding_spec]
refused = []
for bad in (shards[:-1], [xs.XLAShard(torch.zeros(4), s.indices, s.shard_device, 0) for s in shards]):
    try:
        xt.load_local_shards_(bad)
    except RuntimeError as e:
        refused.append(str(e).split(":")[0])
out["load_refused"] = refused

torch_xla.sync(wait=True)
met.clear_all()
x = torch.zeros(16, 8).to("xla")
out["outbound"] = met.metric_data("OutboundData")[:2]
out["tensor_to_data"] = met.metric_data("TensorToData")[:2] == met.metric_data("TransferToDeviceTime")[:2]
xs.mark_sharding(x, mesh1, ("data", None))
x += 1
torch_xla.sync(wait=True)
out["alias"] = met.metric_data("InputOutputAliasCount")[:2]
out["replicated_time"] = met.metric_data("ExecuteReplicatedTime")[0]
x.cpu()
out["inbound"] = met.metric_data("InboundData")[:2]
torch_xla._XLAC._xla_increment_counter("MyCounter", 3)
out["counter"] = met.counter_value("MyCounter")
print("RESULT " + json.dumps(out))
