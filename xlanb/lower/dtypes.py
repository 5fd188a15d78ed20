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


_NARROW_INTS = frozenset(np.dtype(t) for t in (np.int8, np.uint8, np.int16))


def cast(x, dtype):
    """`x` converted to `dtype` as torch's CPU kernels convert (a C++ cast), where XLA's convert
    differs: a float or complex value to int8, uint8 or int16 truncates to a 32-bit integer and then
    wraps (200.0 -> int8 -56; XLA saturates to 127); complex to real keeps the real part. For a float
    outside int32's range (and NaN, inf) C++ leaves the result undefined: CPU gives 0 there, xla the
    wrapped int32 bound (docs/torch_xla.md has the table); int32 and int64 targets are XLA's convert
    (the same in range)."""
    import jax.numpy as jnp
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if dtype in _NARROW_INTS and jnp.issubdtype(x.dtype, jnp.inexact):
        real = jnp.real(x) if jnp.issubdtype(x.dtype, jnp.complexfloating) else x
        return real.astype(np.int32).astype(dtype)
    if jnp.issubdtype(x.dtype, jnp.complexfloating) and not jnp.issubdtype(dtype, jnp.complexfloating):
        return jnp.real(x).astype(dtype)
    return x.astype(dtype)


def to_words(x, width: int):
    """A traced array's bytes in memory order as unsigned ints of `width` bytes, shape
    x.shape + (itemsize // width,). lax's bitcast refuses bool and complex: a bool is its byte, a
    complex its real and imaginary parts (in that order, as in memory)."""
    from jax import lax
    import jax.numpy as jnp
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        words = to_words(jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1), width)    # x.shape + (2, n)
        return words.reshape(words.shape[:-2] + (2 * words.shape[-1],))
    if x.dtype == np.bool_:
        x = x.astype(np.uint8)
    words = lax.bitcast_convert_type(x, np.dtype(f"uint{8 * width}"))
    return words[..., None] if x.dtype.itemsize == width else words


def from_words(words, dtype):
    """Inverse of to_words: unsigned ints of shape s + (n,) back to an array of `dtype` and shape s
    (a bool is true where its byte is not 0)."""
    from jax import lax
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        parts = from_words(words.reshape(words.shape[:-1] + (2, words.shape[-1] // 2)),
                           np.dtype(f"float{4 * dtype.itemsize}"))
        return lax.complex(parts[..., 0], parts[..., 1])
    if dtype == np.bool_:
        return from_words(words, np.uint8) != 0
    return lax.bitcast_convert_type(words[..., 0] if words.shape[-1] == 1 else words, dtype)


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
