"""`torch_xla._internal.tpu`: the TPU generation and chip count, from jax's devices (0 off TPU)."""

from xlanb.compat.devices import tpu_chips as num_available_chips
from xlanb.compat.devices import tpu_version as version
