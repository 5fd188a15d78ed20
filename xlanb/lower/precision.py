"""The precision dots and convolutions are lowered at: the `matmul_precision` ingredient of the graph
being traced (ir/graph.py), never torch's setting at trace time, so an executable always matches its
key. lower/to_jax.py sets it around each trace of a graph's function; rules ask `dot_precision`."""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np
from jax import lax

from xlanb.ir.precision import DEFAULT, xla_precision

_LOWERING = contextvars.ContextVar("xlanb_matmul_precision", default=DEFAULT)
_FLOAT32 = (np.dtype(np.float32), np.dtype(np.complex64))
# float16 too: XLA:TPU multiplies float16 operands in bfloat16 at DEFAULT (3 of their 11 significand
# bits lost: 1% off the CPU's product on the fourth TPU run); torch multiplies them exactly
_EXACT = (np.dtype(np.float64), np.dtype(np.complex128), np.dtype(np.float16))


@contextlib.contextmanager
def lowering_precision(name: str):
    """Rules traced inside lower float32 products at torch's setting `name` ("highest", ...)."""
    token = _LOWERING.set(name)
    try:
        yield
    finally:
        _LOWERING.reset(token)


def current_precision() -> str:
    """torch's setting of the graph being traced ("highest" outside a trace)."""
    return _LOWERING.get()


def dot_precision(dtype) -> lax.Precision | None:
    """The `precision=` of a dot or convolution computing in `dtype`: float32 and complex64 follow
    the graph's setting; float64, complex128 and float16 are always exact (torch never reduces them);
    bfloat16 (exact in one pass, accumulated in float32 through preferred_element_type) and integers
    get None."""
    dt = np.dtype(dtype)
    if dt in _FLOAT32:
        return lax.Precision[xla_precision(_LOWERING.get())]
    if dt in _EXACT:
        return lax.Precision.HIGHEST
    return None
