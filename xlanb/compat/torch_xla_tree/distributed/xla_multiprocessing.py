"""`torch_xla.distributed.xla_multiprocessing` (xmp): spawn over jax.distributed processes."""

from xlanb.compat.spawn import spawn
from xlanb.compat.training import MpModelWrapper
