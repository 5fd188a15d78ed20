"""float64 where XLA emulates it. XLA:TPU computes float64 as two float32s (the value is hi + lo), with
float32's exponent range: a float64's bits there are not IEEE's. Its bitcast of a float64 gives the two
floats' bits (view(dtype) gave other numbers: capture/checks.py refuses it there), and a float64
bitcast inside jnp.signbit / jnp.copysign failed to compile (copysign and digamma on the fourth TPU
run). Rules that need a float's sign bit ask `sign_bit`; lower/fallback.py crosses a host call with a
float64 as its two parts on such a platform.
"""

from __future__ import annotations

import jax.numpy as jnp

from xlanb.state import runtime_state

EMULATED = frozenset({"tpu"})      # jax's platform names
# the `avoid` of a rule that reads a float64's bits (nextafter, frexp): the CPU computes it there
BITS_AVOID = {f"{platform}:float64": "float64 is emulated there as two float32s, without IEEE's bits"
              for platform in sorted(EMULATED)}


def emulated() -> bool:
    """Whether the device that graphs are lowered for emulates float64 (read while a rule is traced)."""
    return runtime_state().jax_device().platform in EMULATED


def sign_bit(x):
    """jnp.signbit of a real float. For float64 where it is emulated, without a bitcast: negative, or
    a zero whose reciprocal is negative (-0.0); a NaN's sign is not seen there (it counts as positive)."""
    if x.dtype == jnp.float64 and emulated():
        return (x < 0) | ((x == 0) & (1 / x < 0))
    return jnp.signbit(x)


def copy_sign(magnitude, sign):
    """jnp.copysign of real floats through `sign_bit`."""
    magnitude, sign = jnp.broadcast_arrays(magnitude, sign)
    return jnp.where(sign_bit(sign), -jnp.abs(magnitude), jnp.abs(magnitude))
