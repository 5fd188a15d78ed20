"""`torch_xla.core` (xlanb.compat)."""
