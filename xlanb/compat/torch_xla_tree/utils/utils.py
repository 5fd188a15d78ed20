"""`torch_xla.utils.utils` (xu): SampleGenerator and getenv_as, as torch_xla defines them."""

import os


class SampleGenerator:
    """Yields `data` `sample_count` times: a stand-in for a DataLoader of synthetic data."""

    def __init__(self, data, sample_count: int):
        self._data = data
        self._sample_count = sample_count
        self._count = 0

    def __iter__(self):
        return SampleGenerator(self._data, self._sample_count)

    def __len__(self) -> int:
        return self._sample_count

    def __next__(self):
        if self._count >= self._sample_count:
            raise StopIteration
        self._count += 1
        return self._data

    next = __next__


def getenv_as(name: str, type, defval=None):
    """`os.environ[name]` converted with `type` (bool goes through int, so "0" is False), else defval."""
    env = os.environ.get(name)
    if env is None:
        return defval
    return bool(int(env)) if type is bool else type(env)


def check_env_flag(name: str, default: str = "") -> bool:
    return os.getenv(name, default).upper() in ("ON", "1", "YES", "TRUE", "Y")


def as_list(t):
    return t if isinstance(t, (tuple, list)) else [t]
