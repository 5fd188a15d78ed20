"""`torch_xla.distributed.spmd` (xs) over xlanb.spmd (xlanb/compat/sharding.py)."""

from xlanb.compat.sharding import (HybridMesh, MarkShardingFunction, Mesh, ShardingSpec, ShardingType, XLAShard,
                                   XLAShardedTensor, clear_sharding, disable_manual_sharding, enable_manual_sharding,
                                   get_1d_mesh, get_global_mesh, mark_sharding, mark_sharding_with_gradients,
                                   set_global_mesh, visualize_sharding)
from xlanb.compat.sharding import mark_manual_sharding as _mark_manual_sharding
from xlanb.spmd.modules import xla_distribute_module, xla_distribute_tensor
