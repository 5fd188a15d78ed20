"""`torch_xla.utils` (xlanb.compat)."""
