"""`torch_xla.runtime` (xr) as xlanb.compat serves it."""

from xlanb.compat.devices import (addressable_device_count, addressable_runtime_device_count, device_type,
                                  global_device_count, global_ordinal, global_runtime_device_attributes,
                                  global_runtime_device_count, host_index, is_bf16_supported, local_device_count,
                                  local_ordinal, local_process_count, process_count, process_index,
                                  runtime_device_attributes, set_device_type, world_size)
from xlanb.compat.sharding import is_spmd, use_spmd
from xlanb.compat.steps import cached_graph_count as get_num_cached_compilation_graph
from xlanb.compat.steps import initialize_cache
