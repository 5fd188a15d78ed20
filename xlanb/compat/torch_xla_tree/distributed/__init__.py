"""`torch_xla.distributed` (xlanb.compat)."""
