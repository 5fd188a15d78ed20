"""`torch_xla.distributed.parallel_loader` (pl) over xlanb.DeviceLoader."""

from xlanb.compat.loader import MpDeviceLoader, ParallelLoader
