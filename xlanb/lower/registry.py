"""The lowering table: ATen overload name -> a pure JAX rule.

A rule is a plain function of JAX arrays and attributes, in the ATen schema's argument
order (tensors as arrays, optional tensors as None, tensor lists as lists, ints/bools/
dtypes as Python values). Rules never see xlanb tensors, so the same table can serve
FX graphs later. Register functional ops only: in-place (`add_`) and `out=` variants
are derived by capture.

Flags (at most what a rule needs):
  promote="same"   operands are cast to the dtype torch computes in first (torch.result_type, but
                   float32 for 16-bit floats, as CPU's kernels compute them)
  promote="float"  as "same", and integer/bool results become the default float dtype
  promote="result" operands are cast to torch.result_type itself (an op on the bits of its dtype:
                   nextafter of a bfloat16 is the next bfloat16)
  saturate=True    with promote, a Python integer is clipped to an integer compute dtype's range
                   before the cast, which would wrap it (clamp: a bound past the range bounds nothing)
  common_first=True  with promote over 16-bit floats (computed in float32), every operand is converted
                   to their common dtype first, as CPU's TensorIterator converts a Python number or a 0-d
                   tensor of another dtype (`h == 0.1` compares float16's 0.1); mul and div read the
                   number as it is, and ops taking it as a parameter (clamp's bounds) too
  rng=True         the rule takes a jax PRNG key as its first argument
  avoid={platform: why}  XLA cannot compile the rule's program on that platform (jax's platform name:
                   "tpu", "gpu", "cpu"); there the op runs on torch CPU (lower/fallback.py), as an op
                   without a rule does, and the report says why: a compiler that aborts ends the process.
                   "platform:dtype" ("tpu:float64") avoids it only where an input or output has that
                   dtype (XLA:TPU emulates float64, and compiles some ops in it only in float32)

Lifted Python scalars reach a rule as weakly typed 0-d arrays: never branch on them.
The lowering driver casts every result to the dtype torch's meta kernel predicted.
"""

from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str
    fn: Callable
    promote: str | None = None
    rng: bool = False
    saturate: bool = False
    common_first: bool = False
    avoid: tuple = ()            # (platform, why) pairs: see the module docstring

    def avoided_on(self, platform: str, dtypes: frozenset = frozenset()) -> str | None:
        """Why XLA cannot compile this rule on `platform` for an op whose inputs and outputs have
        `dtypes` (names: "float64"), or None when it can."""
        for where, why in self.avoid:
            place, _, dtype = where.partition(":")
            if place == platform and (not dtype or dtype in dtypes):
                return why
        return None


LOWERINGS: dict[str, Rule] = {}


def lowers(*names: str, promote: str | None = None, rng: bool = False, saturate: bool = False,
           common_first: bool = False, avoid: dict[str, str] | None = None):
    """Registers `fn` for each ATen overload name (e.g. "aten.add.Tensor")."""
    if promote not in (None, "same", "float", "result"):
        raise ValueError(f"promote must be None, 'same', 'float' or 'result', got {promote!r}")

    def register(fn):
        for name in names:
            if name in LOWERINGS:
                raise ValueError(f"duplicate lowering for {name} ({LOWERINGS[name].fn.__module__})")
            LOWERINGS[name] = Rule(name, fn, promote, rng, saturate, common_first, tuple((avoid or {}).items()))
        return fn
    return register


def lookup(name: str) -> Rule | None:
    _load_rules()
    return LOWERINGS.get(name)


def has_rule(name: str) -> bool:
    _load_rules()
    return name in LOWERINGS


def rule_on(name: str, platform: str, dtypes: frozenset = frozenset()) -> Rule | None:
    """The rule XLA compiles for `name` on `platform` (its inputs and outputs of `dtypes`): None where
    there is none, or it avoids them."""
    rule = lookup(name)
    return None if rule is None or rule.avoid and rule.avoided_on(platform, dtypes) else rule


def fallback_ops(nodes, platform: str) -> tuple:
    """The sorted names of the ops among pending IR `nodes` that run as CPU fallbacks on `platform`."""
    return tuple(sorted({n.name for n in nodes if n.buffer is None and rule_on(n.name, platform, node_dtypes(n)) is None}))


def node_dtypes(node) -> frozenset:
    """The dtype names ("float64") of an IR node's outputs and tensor inputs, as `avoid` reads them."""
    metas = list(node.meta) if isinstance(node.meta, tuple) else [node.meta]
    metas.extend(getattr(a, "meta", None) for a in node.operands)
    return frozenset(str(m.dtype).removeprefix("torch.") for m in metas if getattr(m, "dtype", None) is not None)


_loaded = [False]


def _load_rules() -> None:
    if not _loaded[0]:
        _loaded[0] = True
        from xlanb.lower import rules  # noqa: F401  (registers every family)
