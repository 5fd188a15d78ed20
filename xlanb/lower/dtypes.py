"""torch <-> JAX dtype mapping."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

TORCH_TO_NUMPY = {
    torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64),
    torch.float16: np.dtype(np.float16), torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
    torch.int64: np.dtype(np.int64), torch.int32: np.dtype(np.int32),
    torch.int16: np.dtype(np.int16), torch.int8: np.dtype(np.int8),
    torch.uint8: np.dtype(np.uint8), torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32), torch.uint64: np.dtype(np.uint64),
    torch.bool: np.dtype(np.bool_), torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
    torch.float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
}
NUMPY_TO_TORCH = {v: k for k, v in TORCH_TO_NUMPY.items()}


def to_jax_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return TORCH_TO_NUMPY[dtype]
    except KeyError:
        raise TypeError(f"xlanb: dtype {dtype} has no XLA equivalent") from None


def to_torch_dtype(dtype) -> torch.dtype:
    return NUMPY_TO_TORCH[np.dtype(dtype)]


def default_float() -> np.dtype:
    return TORCH_TO_NUMPY[torch.get_default_dtype()]


def torch_to_numpy(t: torch.Tensor) -> np.ndarray:
    """A host copy of a CPU tensor as numpy (bfloat16 and float8 through a bit view)."""
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    if t.device.type != "cpu":
        t = t.cpu()
    np_dtype = to_jax_dtype(t.dtype)
    if t.dtype in _BIT_VIEWS:
        return t.view(_BIT_VIEWS[t.dtype]).numpy().view(np_dtype).copy()
    return t.numpy().copy()


def numpy_to_torch(a: np.ndarray) -> torch.Tensor:
    """A torch CPU tensor owning a copy of `a`."""
    a = np.asarray(a)
    torch_dtype = to_torch_dtype(a.dtype)
    if torch_dtype in _BIT_VIEWS:
        bits = np.ascontiguousarray(a).reshape(a.shape).view(TORCH_TO_NUMPY[_BIT_VIEWS[torch_dtype]])
        return torch.from_numpy(bits.copy()).view(torch_dtype)
    return torch.from_numpy(np.array(a, copy=True, order="C"))


_BIT_VIEWS = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.int8, torch.float8_e5m2: torch.int8}
