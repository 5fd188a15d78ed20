"""`torch_xla.distributed.spmd.xla_sharding`: the module the spmd names come from in torch_xla."""

from xlanb.compat.sharding import (HybridMesh, MarkShardingFunction, Mesh, ShardingSpec, ShardingType, XLAShard,
                                   XLAShardedTensor, clear_sharding, disable_manual_sharding, enable_manual_sharding,
                                   get_1d_mesh, get_global_mesh, mark_sharding, mark_sharding_with_gradients,
                                   set_global_mesh, visualize_sharding)
from xlanb.compat.sharding import mark_manual_sharding as _mark_manual_sharding
from xlanb.compat.einsum_linear import (EinsumLinear, XLAPatchedLinear, apply_backward_optimization_barrier,
                                        apply_xla_patch_to_nn_linear, xla_patched_nn_linear_forward)
