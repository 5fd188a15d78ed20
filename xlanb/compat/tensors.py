"""What torch_xla's debugging entry points (`torch_xla._XLAC`) and xm's tensor helpers answer
about xla tensors: a storage's id, the debug block, the pending IR and HLO of a list of tensors,
computing tensors now, and moving nested CPU data to the device."""

from __future__ import annotations

import itertools
import weakref

import torch
from torch.utils import _pytree as pytree

from xlanb import debug
from xlanb.capture.realize import realize
from xlanb.capture.tensor import LazyTensor, base_node, storage_of, tensor_meta, view_chain
from xlanb.compat import devices, sharding

_next_id = itertools.count(1)
_storage_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # Storage -> id


def tensors_text(tensors) -> str:
    """The pending IR behind `tensors` (xlanb.debug.ir_text: `IR {` ... `}`, one node a line)."""
    return debug.ir_text(*tensors)


def tensors_hlo(tensors) -> str:
    return debug.hlo_text(*tensors, stage="hlo")


def tensor_id(t) -> int:
    """A number naming the tensor's storage: tensors that alias one storage (a parameter and its
    `detach()`, as `state_dict()` returns) have the same id, others differ. transformers tells tied
    weights apart by it (`id_tensor_storage`)."""
    if type(t) is not LazyTensor:
        raise RuntimeError(f"_xla_get_tensor_id: not an xla tensor ({type(t).__name__} on {t.device})")
    storage = storage_of(t)
    found = _storage_ids.get(storage)
    if found is None:
        found = _storage_ids[storage] = next(_next_id)
    return found


def tensor_debug_info(t) -> str:
    """torch_xla's debug block: id, device, shape, sharding, the pending IR (or None) and the
    device data (or None)."""
    if type(t) is not LazyTensor:
        return "Not a XLATensor\n"
    node = base_node(t)
    shape = tensor_meta(t).text
    pending = node.buffer is None or bool(view_chain(t))
    spec = sharding.get_sharding_spec(t)
    lines = ["XLATensor {", f"TensorID: {tensor_id(t)}", f"Device: {devices.real_devices()[0]}",
             f"XLA Shape: {shape}", f"ShardingSpec: {spec or 'None'}",
             "IR: " + (debug.ir_text(t) if pending else "None")]
    if node.buffer is None:
        lines.append("XLAData: None")
    else:
        lines += ["XLAData: ", f"  Data Device: {'SPMD:0' if spec else devices.real_devices()[0]}",
                  f"  Data Shape: {node.meta.text}"] + (
                     ["  XLAShardedData", f"  OpSharding: {spec}", f"  NumShards: {len(node.buffer.addressable_shards)}"]
                     if spec else [])
    lines += ["Tensor on host: None", "}"]
    return "\n".join(lines) + "\n"


def sync_tensors(tensors, devices_=None, wait: bool = True, sync_xla_data: bool = True) -> None:
    """Computes `tensors` (and whatever pending work the same graph computes): `_xla_sync_multi`,
    and xm.unlazy."""
    for t in tensors:
        if type(t) is LazyTensor:
            realize(t, "_xla_sync_multi")


def send_cpu_data_to_device(data, device, input_sharding=None):
    """Every CPU tensor in `data` (nested lists, tuples, dicts) moved to `device`, sharded by
    `input_sharding` (an xs.ShardingSpec) where it applies; returns a list as torch_xla does."""
    def move(v):
        if not isinstance(v, torch.Tensor):
            return v
        t = v.to(device)
        if input_sharding is not None and input_sharding.can_apply(t):
            input_sharding.apply(t)
        return t
    return [pytree.tree_map(move, d) for d in (data if isinstance(data, (list, tuple)) else [data])]
