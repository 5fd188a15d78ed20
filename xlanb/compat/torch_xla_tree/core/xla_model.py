"""`torch_xla.core.xla_model` (xm) as xlanb.compat serves it: devices, steps and closures,
optimizer_step, collectives across `xmp.spawn` replicas, RNG seed, save (xlanb/compat/*.py)."""

from xlanb.compat.collectives import (REDUCE_AND, REDUCE_MAX, REDUCE_MIN, REDUCE_MUL, REDUCE_OR, REDUCE_SUM,
                                      all_gather, all_reduce, mesh_reduce, reduce_scatter, rendezvous)
from xlanb.compat.devices import (get_xla_supported_devices, is_master_ordinal, is_xla_tensor, master_print,
                                  xla_device, xla_device_hw)
from xlanb.compat.devices import global_ordinal as get_ordinal
from xlanb.compat.devices import local_ordinal as get_local_ordinal
from xlanb.compat.devices import world_size as xrt_world_size
from xlanb.compat.steps import (_fetch_gradients, add_step_closure, get_rng_state, mark_step, optimization_barrier_, optimizer_step,
                                reduce_gradients, save, set_rng_state, wait_device_ops)
from xlanb.compat.training import RateTracker, broadcast_master_param, collective_broadcast


def xla_device_kind(device=None) -> str:
    from xlanb.compat.devices import _jax_devices
    return _jax_devices()[0].device_kind


def get_memory_info(device=None) -> dict:
    """{'bytes_used', 'bytes_limit', 'peak_bytes_used'} from the PJRT device (zeros where it keeps none)."""
    from xlanb.state import runtime_state
    stats = runtime_state().jax_device().memory_stats() or {}
    return {"bytes_used": stats.get("bytes_in_use", 0), "bytes_limit": stats.get("bytes_limit", 0),
            "peak_bytes_used": stats.get("peak_bytes_in_use", 0)}


def send_cpu_data_to_device(data, device, input_sharding=None):
    """Every CPU tensor in `data` (nested lists, tuples, dicts) moved to `device`, sharded by
    `input_sharding` (an xs.ShardingSpec) where it applies; returns a list as torch_xla does."""
    from torch.utils import _pytree as pytree

    import torch

    def move(v):
        if not isinstance(v, torch.Tensor):
            return v
        t = v.to(device)
        if input_sharding is not None and input_sharding.can_apply(t):
            input_sharding.apply(t)
        return t
    return [pytree.tree_map(move, d) for d in (data if isinstance(data, (list, tuple)) else [data])]


def set_replication(device, devices) -> None:
    """torch_xla's per-thread replication setup; a no-op here: `xmp.spawn` sets the replicas up."""
    del device, devices


def unlazy(tensors) -> None:
    """Computes `tensors` now (torch_xla's unlazy)."""
    from xlanb.compat.torch_xla_tree._XLAC import _xla_sync_multi
    _xla_sync_multi(tensors)
