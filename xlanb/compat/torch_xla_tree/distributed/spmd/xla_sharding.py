"""`torch_xla.distributed.spmd.xla_sharding`: the module the spmd names come from in torch_xla."""

from xlanb.compat.sharding import (HybridMesh, MarkShardingFunction, Mesh, ShardingSpec, ShardingType, XLAShard,
                                   XLAShardedTensor, clear_sharding, get_1d_mesh, get_global_mesh, mark_sharding,
                                   mark_sharding_with_gradients,
                                   set_global_mesh, visualize_sharding)
