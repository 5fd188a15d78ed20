"""`torch_xla._internal` (xlanb.compat): only `tpu`, which torch_xla's tests consult to skip."""
