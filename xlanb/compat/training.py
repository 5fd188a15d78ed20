"""What torch_xla's training scripts call around the step: xm.RateTracker, xm.broadcast_master_param,
xm.collective_broadcast, torch_xla.test.test_utils' progress lines and (absent) summary writer,
torch_xla.utils.utils' SampleGenerator and environment helpers, and xmp.MpModelWrapper."""

from __future__ import annotations

import os
import time

import torch

from xlanb.capture.tensor import LazyTensor
from xlanb.compat import collectives, devices


class RateTracker:
    """Examples per second: `rate()` since the last call (smoothed), `global_rate()` since the start."""

    def __init__(self, smooth_factor: float | None = None):
        self._smooth = 0.4 if smooth_factor is None else smooth_factor
        self._start = self._last = time.time()
        self._total = self._count = 0.0
        self._rate: float | None = None

    def add(self, count: float) -> None:
        self._count += count

    def rate(self) -> float:
        now = time.time()
        current = self._count / max(now - self._last, 1e-9)
        rate = current if self._rate is None else (1 - self._smooth) * current + self._smooth * self._rate
        self._total += self._count
        self._count, self._last, self._rate = 0.0, now, rate
        return rate

    def global_rate(self) -> float:
        return (self._total + self._count) / max(time.time() - self._start, 1e-9)


def collective_broadcast(tensors: list[torch.Tensor], root_ordinal: int = 0, groups=None, pin_layout: bool = True):
    """Every replica's `tensors` take replica `root_ordinal`'s values (in place); nothing on one replica."""
    if devices.world_size() == 1:
        return
    xla = [t for t in tensors if type(t) is LazyTensor]
    with torch.no_grad():
        if devices.global_ordinal() != root_ordinal:
            for t in xla:
                t.zero_()
        collectives.all_reduce(collectives.REDUCE_SUM, xla, groups=groups)


def broadcast_master_param(model: torch.nn.Module) -> None:
    """The master replica's parameters and buffers on every replica."""
    from xlanb.compat.steps import sync
    collective_broadcast(list(model.parameters()) + list(model.buffers()))
    sync()


def now(format: str = "%H:%M:%S") -> str:
    return time.strftime(format)


def _device_spec(device) -> str:
    return str(device)


def print_training_update(device, step, loss, rate, global_rate, epoch=None, summary_writer=None) -> None:
    """torch_xla's progress line: `| Training Device=xla:0 Epoch=1 Step=0 Loss=2.30259 Rate=... Time=...`."""
    parts = ["Training", f"Device={_device_spec(device)}", f"Epoch={epoch}" if epoch is not None else None,
             f"Step={step}", f"Loss={loss:.5f}", f"Rate={rate:.2f}", f"GlobalRate={global_rate:.2f}", f"Time={now()}"]
    print("|", " ".join(p for p in parts if p is not None), flush=True)


def print_test_update(device, accuracy, epoch=None, step=None) -> None:
    parts = ["Test", f"Device={_device_spec(device)}", f"Step={step}" if step is not None else None,
             f"Epoch={epoch}" if epoch is not None else None, f"Time={now()}",
             f"Accuracy={accuracy:.2f}" if accuracy is not None else None]
    print("|", " ".join(p for p in parts if p is not None), flush=True)


def get_summary_writer(logdir):
    """No TensorBoard writer: None (the write_* functions accept it)."""
    return None


def write_to_summary(summary_writer, global_step=None, dict_to_write=None, write_xla_metrics=False) -> None:
    if summary_writer is not None:
        for k, v in (dict_to_write or {}).items():
            summary_writer.add_scalar(k, v, global_step)


def close_summary_writer(summary_writer) -> None:
    if summary_writer is not None:
        summary_writer.close()


# torch_xla.utils.utils ------------------------------------------------------------------

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


class MpModelWrapper:
    """xmp's helper for fork-started replicas: `.to(device)` moves the wrapped model."""

    def __init__(self, model):
        self._model = model

    def to(self, device):
        return self._model.to(device)
