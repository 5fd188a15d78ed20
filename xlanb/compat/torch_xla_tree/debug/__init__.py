"""`torch_xla.debug` (xlanb.compat)."""
