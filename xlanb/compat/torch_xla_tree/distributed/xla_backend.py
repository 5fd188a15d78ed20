"""`torch_xla.distributed.xla_backend`: importing it registers nothing. torch.distributed's "xla"
process-group backend is not provided; replicas talk through xm's collectives (xmp.spawn)."""
