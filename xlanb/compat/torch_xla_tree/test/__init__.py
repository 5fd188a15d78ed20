"""`torch_xla.test` (xlanb.compat): only `test_utils`, which torch_xla's example scripts import."""
