"""`torch_xla.experimental.spmd_fully_sharded_data_parallel` (xlanb/compat/fsdp.py)."""

from xlanb.compat.fsdp import SpmdFullyShardedDataParallel
