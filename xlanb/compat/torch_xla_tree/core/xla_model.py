"""`torch_xla.core.xla_model` (xm) as xlanb.compat serves it: devices, steps and closures,
optimizer_step, collectives across `xmp.spawn` replicas, RNG seed, save (xlanb/compat/*.py)."""

from xlanb.compat.collectives import (REDUCE_AND, REDUCE_MAX, REDUCE_MIN, REDUCE_MUL, REDUCE_OR, REDUCE_SUM,
                                      all_gather, all_reduce, mesh_reduce, reduce_scatter, rendezvous)
from xlanb.compat.devices import (get_xla_supported_devices, is_master_ordinal, is_xla_tensor, master_print,
                                  set_replication, xla_device, xla_device_hw)
from xlanb.compat.devices import device_kind as xla_device_kind
from xlanb.compat.devices import global_ordinal as get_ordinal
from xlanb.compat.devices import local_ordinal as get_local_ordinal
from xlanb.compat.devices import memory_info as get_memory_info
from xlanb.compat.devices import world_size as xrt_world_size
from xlanb.compat.steps import (_fetch_gradients, add_step_closure, get_rng_state, mark_step, optimization_barrier_, optimizer_step,
                                reduce_gradients, save, set_rng_state, wait_device_ops)
from xlanb.compat.tensors import send_cpu_data_to_device
from xlanb.compat.tensors import sync_tensors as unlazy
from xlanb.compat.training import RateTracker, broadcast_master_param, collective_broadcast
