"""SPMD on XLA's partitioner through JAX shardings, and multi-host through jax.distributed.

    import xlanb.spmd as xs
    mesh = xs.get_1d_mesh("data")                     # every device, one axis
    xs.data_parallel(model, mesh)                     # parameters replicated
    xs.mark_sharding(x, mesh, ("data", None))         # the batch split over devices

Names follow torch_xla's `torch_xla.distributed.spmd` where it has them (docs/sharding.md).
"""

from xlanb.spmd.api import (clear_sharding, get_sharding, mark_sharding, sharding_spec, to_one_device,
                            visualize_sharding)
from xlanb.spmd.manual import disable_manual_sharding, enable_manual_sharding
from xlanb.spmd.mesh import Mesh, get_1d_mesh
from xlanb.spmd.modules import data_parallel, fsdp, fsdp_plan, xla_distribute_module, xla_distribute_tensor
from xlanb.spmd.multihost import global_device_count, initialize, process_count, process_index

__all__ = ["Mesh", "get_1d_mesh", "mark_sharding", "clear_sharding", "get_sharding", "sharding_spec",
           "visualize_sharding", "to_one_device", "enable_manual_sharding", "disable_manual_sharding", "data_parallel", "fsdp", "fsdp_plan", "xla_distribute_tensor",
           "xla_distribute_module", "initialize", "process_index", "process_count", "global_device_count"]
