"""`torch_xla._XLAC`: the debugging entry points torch_xla's scripts and tests call, over
xlanb.debug and xlanb.spmd. Only these; the rest of torch_xla's C++ binding is not provided.
"""

from __future__ import annotations

import itertools
import weakref

from xlanb import debug
from xlanb.capture import modes
from xlanb.capture.tensor import LazyTensor, base_node, storage_of, tensor_meta, view_chain
from xlanb.compat import devices, sharding, steps

_next_id = itertools.count(1)
_storage_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # Storage -> id


def _get_xla_sharding_spec(t) -> str:
    return sharding.get_sharding_spec(t)


def _get_xla_sharding_type(t):
    return sharding.get_sharding_type(t)


def _get_xla_tensors_text(tensors) -> str:
    """The pending IR behind `tensors` (xlanb.debug.ir_text: `IR {` ... `}`, one node a line)."""
    return debug.ir_text(*tensors)


def _get_xla_tensors_hlo(tensors) -> str:
    return debug.hlo_text(*tensors, stage="hlo")


def _xla_get_tensor_id(t) -> int:
    """A number naming the tensor's storage: tensors that alias one storage (a parameter and its
    `detach()`, as `state_dict()` returns) have the same id, others differ. transformers tells tied
    weights apart by it (`id_tensor_storage`)."""
    if type(t) is not LazyTensor:
        raise RuntimeError(f"_xla_get_tensor_id: not an xla tensor ({type(t).__name__} on {t.device})")
    storage = storage_of(t)
    tensor_id = _storage_ids.get(storage)
    if tensor_id is None:
        tensor_id = _storage_ids[storage] = next(_next_id)
    return tensor_id


def _get_xla_tensor_debug_info(t) -> str:
    """torch_xla's debug block: id, device, shape, sharding, the pending IR (or None) and the
    device data (or None)."""
    if type(t) is not LazyTensor:
        return "Not a XLATensor\n"
    node = base_node(t)
    shape = tensor_meta(t).text
    pending = node.buffer is None or bool(view_chain(t))
    lines = ["XLATensor {", f"TensorID: {_xla_get_tensor_id(t)}", f"Device: {devices.real_devices()[0]}",
             f"XLA Shape: {shape}", f"ShardingSpec: {sharding.get_sharding_spec(t) or 'None'}",
             "IR: " + (debug.ir_text(t) if pending else "None")]
    if node.buffer is None:
        lines.append("XLAData: None")
    else:
        spec = sharding.get_sharding_spec(t)
        lines += ["XLAData: ", f"  Data Device: {'SPMD:0' if spec else devices.real_devices()[0]}",
                  f"  Data Shape: {node.meta.text}"] + (
                     ["  XLAShardedData", f"  OpSharding: {spec}", f"  NumShards: {len(node.buffer.addressable_shards)}"]
                     if spec else [])
    lines += ["Tensor on host: None", "}"]
    return "\n".join(lines) + "\n"


def _xla_metrics_report() -> str:
    from xlanb import metrics
    return metrics.metrics_report()


def _xla_counter_value(name: str):
    from xlanb import metrics
    return metrics.counter_value(name)


def _xla_get_default_device() -> str:
    return str(devices.device())


def _xla_get_devices() -> list[str]:
    return devices.get_xla_supported_devices()


def _xla_step_marker(device: str = "", devices_=None, wait: bool = True, reset_scope: bool = True) -> None:
    steps.sync(wait=wait)


def _xla_sync_multi(tensors, devices_=None, wait: bool = True, sync_xla_data: bool = True) -> None:
    """Computes `tensors` (and whatever pending work the same graph computes)."""
    from xlanb.capture.realize import realize
    for t in tensors:
        if type(t) is LazyTensor:
            realize(t, "_xla_sync_multi")


def _xla_get_rng_seed(device: str = "") -> int:
    return steps.get_rng_state()


def _xla_set_rng_seed(seed: int, device: str = "") -> None:
    steps.set_rng_state(seed)


def _get_use_eager_mode() -> bool:
    return modes.is_eager_mode()


def _set_use_eager_mode(enable: bool) -> None:
    modes.eager_mode(enable)


def _xla_wait_device_ops(devices=None) -> None:
    steps.wait_device_ops()


def _xla_get_replication_devices_count() -> int:
    return 0 if devices.world_size() == 1 else devices.world_size()



def _global_tensor_from_cpu_shards(shards, sharding, global_shape=None):
    """An xla tensor put together from one CPU shard per device (xlanb/compat/mesh.py)."""
    from xlanb.compat.mesh import global_tensor_from_cpu_shards
    return global_tensor_from_cpu_shards(shards, sharding, global_shape)


def _xla_increment_counter(name: str, n: int = 1) -> None:
    from xlanb.compat.counters import increment_counter
    increment_counter(name, n)
