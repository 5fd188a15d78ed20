"""`torch_xla.utils.utils` (xu): SampleGenerator and getenv_as, as torch_xla defines them
(xlanb/compat/training.py)."""

from xlanb.compat.training import SampleGenerator, as_list, check_env_flag, getenv_as
