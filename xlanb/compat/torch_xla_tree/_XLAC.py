"""`torch_xla._XLAC`: the debugging entry points torch_xla's scripts and tests call, named over
xlanb.debug, xlanb.metrics and xlanb.compat. Only these; the rest of torch_xla's C++ binding is not
provided.
"""

from xlanb.capture.modes import eager_mode as _set_use_eager_mode
from xlanb.capture.modes import is_eager_mode as _get_use_eager_mode
from xlanb.compat.counters import increment_counter as _xla_increment_counter
from xlanb.compat.devices import default_device as _xla_get_default_device
from xlanb.compat.devices import get_xla_supported_devices as _xla_get_devices
from xlanb.compat.devices import replication_devices_count as _xla_get_replication_devices_count
from xlanb.compat.mesh import global_tensor_from_cpu_shards as _global_tensor_from_cpu_shards
from xlanb.compat.sharding import full_to_shard_shape as _spmd_full_to_shard_shape
from xlanb.compat.sharding import get_sharding_spec as _get_xla_sharding_spec
from xlanb.compat.sharding import get_sharding_type as _get_xla_sharding_type
from xlanb.compat.sharding import shard_to_full_shape as _spmd_shard_to_full_shape
from xlanb.compat.steps import get_rng_state as _xla_get_rng_seed
from xlanb.compat.steps import set_rng_state as _xla_set_rng_seed
from xlanb.compat.steps import step_marker as _xla_step_marker
from xlanb.compat.steps import wait_device_ops as _xla_wait_device_ops
from xlanb.compat.tensors import sync_tensors as _xla_sync_multi
from xlanb.compat.tensors import tensor_debug_info as _get_xla_tensor_debug_info
from xlanb.compat.tensors import tensor_id as _xla_get_tensor_id
from xlanb.compat.tensors import tensors_hlo as _get_xla_tensors_hlo
from xlanb.compat.tensors import tensors_text as _get_xla_tensors_text
from xlanb.metrics import counter_value as _xla_counter_value
from xlanb.metrics import metrics_report as _xla_metrics_report
