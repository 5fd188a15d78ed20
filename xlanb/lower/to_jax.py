"""Graph -> a pure JAX function, through the lowering table.

The function takes (*input buffers, [float scalars], [int scalars]) and returns the
roots' values. It holds no reference to graph nodes or buffers: every node is reduced
to a plain step (rule, argument template with positions, output dtypes), so caches in
JAX can never keep device memory alive.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import torch
from jax._src import core as jax_core
from jax._src.lax.lax import _convert_element_type
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from xlanb.ir.graph import Graph, location_text
from xlanb.ir.node import Meta, Node, Scalar
from xlanb.ir.sharding import corner
from xlanb.lower import fallback, threefry
from xlanb.lower.dtypes import to_jax_dtype
from xlanb.lower.precision import current_precision, lowering_precision
from xlanb.lower.registry import Rule, lookup, node_dtypes
from xlanb.lower.rules import sharding as sharding_rules
from xlanb.lower.torch_versions import CLAMP_WRAPS_NEGATIVE_INTO_UNSIGNED
from xlanb.lower.tree import join, split
from xlanb.state import runtime_state


_F64, _I64 = np.dtype(np.float64), np.dtype(np.int64)


class LoweringError(RuntimeError):
    """A rule failed while tracing; carries the node so the report can name it."""


class _Ref:
    """Template slot: the value of graph position `pos`."""
    __slots__ = ("pos",)

    def __init__(self, pos):
        self.pos = pos


class _ScalarRef:
    """Template slot: lifted scalar `index` of vector `kind` ("f" or "i")."""
    __slots__ = ("kind", "index", "py_type")

    def __init__(self, kind, index, py_type):
        self.kind, self.index, self.py_type = kind, index, py_type


def _template(x, index, slots):
    t = type(x)
    if t is Node:
        return _Ref(index[x])
    if t is Scalar:
        return slots[id(x)]
    if t is tuple or t is list:
        return t(_template(y, index, slots) for y in x)
    if t is dict:
        return {k: _template(v, index, slots) for k, v in x.items()}
    return x


def _fill(x, env, scalars):
    t = type(x)
    if t is _Ref:
        return env[x.pos]
    if t is _ScalarRef:
        return scalars[x.kind][x.index]
    if t is tuple or t is list:
        return t(_fill(y, env, scalars) for y in x)
    if t is dict:
        return {k: _fill(v, env, scalars) for k, v in x.items()}
    return x


def _operand_examples(x, metas, out: list) -> None:
    """torch-side stand-ins of the operands, for torch's own type promotion."""
    t = type(x)
    if t is _Ref:
        m = metas[x.pos]
        if isinstance(m, Meta):
            out.append(torch.empty(m.shape, dtype=m.dtype, device="meta"))
    elif t is _ScalarRef:
        out.append(x.py_type(2))
    elif t is tuple or t is list:
        for y in x:
            _operand_examples(y, metas, out)
    elif t in (int, float, complex) and not isinstance(x, bool):
        out.append(x)


def _cast_operands(x, dtype, casts: dict | None = None):
    """Operands cast to `dtype`. `casts` memoises casts within one lowering, so a lifted scalar
    used by 500 ops is converted once, not 500 times."""
    t = type(x)
    if isinstance(x, jax.Array):
        if x.dtype == dtype:
            return x
        if casts is None:
            return lax.convert_element_type(x, dtype)
        entry = casts.get((id(x), dtype))
        if entry is None:     # the entry keeps x alive, so its id is not reused while memoised
            entry = casts[(id(x), dtype)] = (x, lax.convert_element_type(x, dtype))
        return entry[1]
    if t is tuple or t is list:
        return t(_cast_operands(y, dtype, casts) for y in x)
    if t is int and dtype.kind in "iu" and not np.iinfo(dtype).min <= x <= np.iinfo(dtype).max:
        return np.array(x, np.int64).astype(dtype)[()]     # wrapped, as CPU converts it (uint8's -1: 255)
    return x


def promote_operands(rule: Rule, args, kwargs: dict, dtype, casts: dict | None = None, first=None):
    """A promoting rule's operands cast to the dtype torch computes in (`rule.saturate`: integers
    clipped to its range first; `first`: converted to that dtype first, as CPU converts a number or a
    0-d tensor to a 16-bit float operand's dtype before computing in float32)."""
    if rule.saturate and jnp.issubdtype(dtype, jnp.integer):
        args = saturated(args, dtype)
        kwargs = {k: saturated(v, dtype) for k, v in kwargs.items()}
    if first is not None:
        args = _rounded(args, first)
        kwargs = {k: _rounded(v, first) for k, v in kwargs.items()}
    return _cast_operands(args, dtype, casts), {k: _cast_operands(v, dtype, casts) for k, v in kwargs.items()}


def _rounded(x, dtype):
    """Operands of another dtype than `dtype` converted to it (a Python number stays one, rounded)."""
    t = type(x)
    if t is tuple or t is list:
        return t(_rounded(y, dtype) for y in x)
    if t is float or t is int:
        with np.errstate(over="ignore"):        # past the dtype's range: inf, as CPU converts it
            r = float(np.asarray(x, dtype=dtype))
        return x if r == x else r
    if isinstance(x, jax.Array) and x.dtype != dtype and jnp.issubdtype(x.dtype, jnp.number):
        return lax.convert_element_type(x, dtype)
    return x


def saturated(x, dtype):
    """Python integers (constants, and lifted ones: weakly typed int64) clipped to integer `dtype`'s range,
    below it only where the installed torch does so (torch_versions.CLAMP_WRAPS_NEGATIVE_INTO_UNSIGNED)."""
    t = type(x)
    if t is tuple or t is list:
        return t(saturated(y, dtype) for y in x)
    if t is int or (isinstance(x, jax.Array) and x.dtype == _I64 and jax.typeof(x).weak_type):
        info = np.iinfo(dtype)
        low = None if info.min == 0 and CLAMP_WRAPS_NEGATIVE_INTO_UNSIGNED else int(info.min)
        high = min(int(info.max), int(np.iinfo(np.int64).max))
        if t is not int:
            return jnp.clip(x, low, high)
        return min(x, high) if low is None else min(max(x, low), high)
    return x


class Step:
    __slots__ = ("pos", "name", "rule", "args", "kwargs", "out_dtypes", "promote_to", "first", "op", "meta", "empty",
                 "origin", "manual", "why", "pick")


def _out_dtypes(meta):
    if isinstance(meta, tuple):
        return tuple(to_jax_dtype(m.dtype) if m is not None else None for m in meta)
    return to_jax_dtype(meta.dtype)


def _promotion(rule: Rule, args, kwargs, metas):
    examples: list = []
    _operand_examples(args, metas, examples)
    if kwargs:
        _operand_examples(tuple(kwargs.values()), metas, examples)
    return _promotion_from_examples(rule, examples)


def _promotion_from_examples(rule: Rule, examples: list):
    """(the dtype torch computes in, the dtype operands are converted to first or None) for these
    operands (tensors and Python numbers): `rule.common_first` over 16-bit floats, their common dtype."""
    if not examples:
        return None, None
    kind = (ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT if rule.promote == "float"
            else ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    compute, result = elementwise_dtypes(*examples, type_promotion_kind=kind)
    if rule.promote == "result":
        return to_jax_dtype(result), None
    first = to_jax_dtype(result) if rule.common_first and result in _HALF and compute != result else None
    return to_jax_dtype(compute), first


_HALF = (torch.float16, torch.bfloat16)


def build_function(graph: Graph):
    """Returns (fn, float scalar values, int scalar values) for `graph`: fn(*input buffers,
    [float vector], [int vector]) computes the roots; the values fill the vectors at a launch."""
    index = {n: i for i, n in enumerate(graph.order)}
    refs, floats, ints = [], [], []
    for s in graph.scalars:                  # one per slot
        if type(s.value) is float:
            refs.append(_ScalarRef("f", len(floats), float))
            floats.append(s.value)
        else:
            refs.append(_ScalarRef("i", len(ints), int))
            ints.append(s.value)
    slots = {use: refs[slot] for use, slot in graph.scalar_slot.items()}
    metas = [n.meta for n in graph.order]
    input_pos = [index[n] for n in graph.inputs]
    steps = []
    manual: dict = {}                # position -> the mesh of a manual value (lower/rules/sharding.py)
    platform = runtime_state().jax_device().platform     # the device the graph is lowered for (executor)
    for i, n in enumerate(graph.order):
        if n.buffer is not None:
            continue
        st = Step()
        st.manual = _manual_step(n, index, manual) if manual or n.name == sharding_rules.FULL_TO_SHARD else None
        st.pos, st.name, st.op, st.meta = i, n.name, n.op, n.meta
        st.origin = origin(n, i)
        rule = lookup(n.name)
        avoided = rule.avoided_on(platform, node_dtypes(n)) if rule is not None and rule.avoid else None
        st.rule = None if avoided else rule         # avoided: the CPU fallback, as with no rule
        st.why = avoided or "no lowering"
        st.args = _template(n.args, index, slots)
        st.kwargs = _template(n.kwargs, index, slots) if n.kwargs else {}
        st.out_dtypes = _out_dtypes(n.meta)
        st.empty = isinstance(n.name, str) and n.name.startswith(("aten.", "prims.")) and _all_empty(n.meta)
        st.promote_to, st.first = (_promotion(st.rule, st.args, st.kwargs, metas)
                                   if st.rule is not None and st.rule.promote else (None, None))
        st.pick = _pick(st)
        steps.append(st)
    root_pos = [index[r] for r in graph.roots]
    if any(p in manual for p in root_pos):
        raise LoweringError("a manually sharded value is no tensor's value: bring it back with "
                            "disable_manual_sharding(t, mesh, partition_spec, full_shape) before it leaves the graph")
    unpad_in, pad_out = _padding(graph)
    n_inputs, n_floats, n_ints = len(input_pos), len(floats), len(ints)
    size = len(graph.order)
    matmul_precision = graph.key.matmul_precision     # the key's, not torch's setting when fn is traced

    def fn(*arrays):
        env = [None] * size
        for k, p in enumerate(input_pos):
            env[p] = arrays[k]
        for k, cut in unpad_in:               # a padded sharded buffer: the value is its corner
            env[input_pos[k]] = arrays[k][cut]
        rest = arrays[n_inputs:]
        scalars = {"f": [], "i": [], "casts": {}}
        if n_floats:
            fvec, rest = rest[0], rest[1:]
            scalars["f"] = [_convert_element_type(fvec[j], _F64, weak_type=True) for j in range(n_floats)]
        if n_ints:
            ivec = rest[0]
            scalars["i"] = [_convert_element_type(ivec[j], _I64, weak_type=True) for j in range(n_ints)]
        # a number cast to a narrower float overflows to inf as on CPU, silently (numpy would warn)
        with lowering_precision(matmul_precision), np.errstate(over="ignore"):
            for st in steps:
                env[st.pos] = run_step(st, env, scalars) if st.manual is None else _run_manual(st, env, scalars)
            outs = [env[p] for p in root_pos]
            for k, pad in pad_out:
                outs[k] = sharding_rules.pad_output(outs[k], pad)
        return tuple(outs)

    return fn, floats, ints


def _manual_step(n: Node, index: dict, manual: dict):
    """(kind, mesh, positions of its manual operands) for a node of a manual region, None for any
    other; the manual value it makes goes into `manual`."""
    if n.name == sharding_rules.FULL_TO_SHARD:
        mesh = manual[index[n]] = n.args[1].sharding.mesh
        return ("to_shards", mesh, ())
    ins = tuple(dict.fromkeys(index[o] for o in n.operands if type(o) is Node and index[o] in manual))
    if not ins:
        return None
    mesh = manual[ins[0]]
    if n.name == sharding_rules.SHARD_TO_FULL:
        return ("to_full", mesh, ins)
    manual[index[n]] = mesh
    return ("op", mesh, ins)


def _run_manual(st: Step, env, scalars):
    """A node of a manual region (lower/rules/sharding.py): a manual value is (devices, *shard shape),
    device k's block its shard; an op runs on each device's blocks inside a shard_map, the values it
    reads from outside the region (replicated numbers and tensors) closed over."""
    kind, mesh, ins = st.manual
    if kind != "op":                  # into or out of the region: the rule's shard_map
        with jax.named_scope(st.origin):
            return st.rule.fn(env[st.args[0].pos], st.args[1])
    devices = sharding_rules.devices_spec(mesh)
    local = {"f": scalars["f"], "i": scalars["i"], "casts": {}}     # casts made inside stay inside

    def body(*blocks):
        outside = [env[p] for p in ins]
        for p, b in zip(ins, blocks):
            env[p] = b[0]
        try:
            out = run_step(st, env, local)
        finally:
            for p, v in zip(ins, outside):
                env[p] = v
        return jax.tree_util.tree_map(lambda o: o[None], out)
    return jax.shard_map(body, mesh=mesh, in_specs=(devices,) * len(ins), out_specs=devices,
                         check_vma=False)(*(env[p] for p in ins))


def _padding(graph: Graph) -> tuple[list, list]:
    """The inputs held in padded buffers (k, slices of their values), and the roots to leave
    padded (k, pad): uneven shards (runtime/partition.py's lay_out). Only graphs on a mesh have any."""
    if not graph.key.shardings and not any(n.name == sharding_rules.CONSTRAINT for n in graph.roots):
        return [], []
    unpad = [(k, corner(n.meta.shape)) for k, n in enumerate(graph.inputs)
             if tuple(getattr(n.buffer, "shape", n.meta.shape)) != tuple(n.meta.shape)]
    pad = [(k, p) for k, p in ((k, sharding_rules.padded_output(r)) for k, r in enumerate(graph.roots)) if p is not None]
    return unpad, pad


def origin(n: Node, pos: int) -> str:
    """The name scope of a node's HLO ops, so XLA's op_name metadata (kept through fusion) says
    where each op came from: `aten.mul.Tensor %5 [blocks.0.ff] 1234.py:4` (position in the graph,
    module path and user line when recorded). report/fusions.py reads it back."""
    text = f"{n.name} %{pos}"
    if n.scope is not None:
        text += f" [{n.scope or '<top>'}]"
    if n.location:
        text += f" {location_text(n.location)}"
    return text


def _all_empty(meta) -> bool:
    """Every output has zero elements (and there is one): nothing to compute."""
    metas = meta if isinstance(meta, tuple) else (meta,)
    return bool(metas) and all(m is None or 0 in m.shape for m in metas) and any(m is not None for m in metas)


def _empty_outputs(st: Step):
    if isinstance(st.meta, tuple):
        return tuple(None if m is None else jnp.zeros(m.shape, d) for m, d in zip(st.meta, st.out_dtypes))
    return jnp.zeros(st.meta.shape, st.out_dtypes)


def _pick(st: Step):
    """(position, index) of a multi-output node's element that a `xlanb.getitem` step takes, or None.
    Such a step is the element itself: it is taken from the list directly, not through the rules'
    memo, whose key would hold every element's type (n getitems of a foreach op over n parameters
    cost O(n**2) so: 260 of the 440 steps of W7's AdamW step, over 52 parameters)."""
    if st.name != "xlanb.getitem" or st.rule is None or st.manual is not None or type(st.meta) is not Meta:
        return None
    ref, i = st.args
    return (ref.pos, i) if type(ref) is _Ref and type(i) is int else None


def run_step(st: Step, env, scalars):
    if st.pick is not None:
        pos, i = st.pick
        x = env[pos][i]
        if isinstance(x, jax.Array) and x.dtype == st.out_dtypes and tuple(x.shape) == tuple(st.meta.shape):
            return x            # anything else (a missing element, another dtype) takes the rule's path
    if st.empty:      # zero-element outputs: no rule needs to handle empty inputs
        return _empty_outputs(st)
    args = _fill(st.args, env, scalars)
    kwargs = _fill(st.kwargs, env, scalars) if st.kwargs else {}
    try:
        with jax.named_scope(st.origin):
            if st.rule is None:
                return _cast_out(fallback.lower_fallback(st.op, st.name, args, kwargs, st.meta, st.why), st.out_dtypes,
                                 st.name, st.meta)
            if st.promote_to is not None:
                args, kwargs = promote_operands(st.rule, args, kwargs, st.promote_to, scalars["casts"], st.first)
            return _traced_once(st, args, kwargs)
    except LoweringError:
        raise
    except Exception as e:   # a rule bug or an unsupported argument: name the op
        raise LoweringError(f"lowering {st.name} failed: {type(e).__name__}: {e}") from e


def _apply_rule(st: Step, args, kwargs):
    """The rule on its (promoted) operands, and the casts to torch's output dtypes."""
    if st.rule.rng:
        key, args = threefry.wrap(args[0]), args[1:]
        out = st.rule.fn(key, *args, **kwargs)
    else:
        out = st.rule.fn(*args, **kwargs)
    return _cast_out(out, st.out_dtypes, st.name, st.meta)


# Rules run through jax.numpy, whose Python costs ~100 us per call while tracing; the same rule
# on the same input types and constants always traces to the same jaxpr. So each (rule, input
# avals, constants, output metas) is traced to a jaxpr once, the second time a node of that kind
# is met (the first is traced into the graph as it is: most kinds of a graph lowered once are met
# once), and every later node of that kind replays the jaxpr's primitives (a few us each). A memo
# of pure functions, bounded: a jaxpr may hold the constants its rule made (an arange, a mask), so
# the memo starts over past RULE_JAXPRS entries.
# The graph's matmul precision is part of the memo's key: a dot traced at one is not another's.
RULE_JAXPRS = 4096
_RULE_JAXPRS: dict = {}
_SEEN = object()            # the memo's entry for a kind met once: traced the second time it is met


def _traced_once(st: Step, args, kwargs):
    return traced_once(lambda *a, **kw: _apply_rule(st, a, kw), (st.rule.fn, st.name, st.meta), args, kwargs)


def traced_once(fn, kind, args, kwargs):
    """fn(*args, **kwargs) inside a trace, through the memo: `kind` (hashable) names what fn computes
    besides its operands' types and constants (a node's rule, name and output metas)."""
    leaves: list = []
    skeleton = split((args, kwargs), leaves)
    key = (kind, skeleton, tuple(jax.typeof(leaf) for leaf in leaves), current_precision())
    try:
        entry = _RULE_JAXPRS.get(key)
    except TypeError:                      # an unhashable constant: trace this call as it is
        return fn(*args, **kwargs)
    if entry is None:                      # first seen: traced as it is (a jaxpr of it would be replayed once)
        if len(_RULE_JAXPRS) >= RULE_JAXPRS:
            _RULE_JAXPRS.clear()
        _RULE_JAXPRS[key] = _SEEN
        return fn(*args, **kwargs)
    if entry is _SEEN:

        def body(*arrays):
            a, kw = join(skeleton, arrays)
            return fn(*a, **kw)
        closed, shapes = jax.make_jaxpr(body, return_shape=True)(*leaves)
        entry = _RULE_JAXPRS[key] = (closed, jax.tree_util.tree_structure(shapes))
    closed, tree = entry
    outs = jax_core.eval_jaxpr(closed.jaxpr, closed.consts, *leaves)
    # an output the jaxpr folded to a constant comes back as a host array: make it a jax array
    outs = [o if isinstance(o, jax.Array) else jnp.asarray(o) for o in outs]
    return jax.tree_util.tree_unflatten(tree, outs)


def _cast_out(out, dtypes, name, meta=None):
    if isinstance(dtypes, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(dtypes):
            raise LoweringError(f"lowering {name} returned {type(out).__name__}, expected {len(dtypes)} outputs")
        metas = meta if isinstance(meta, tuple) else (None,) * len(dtypes)
        return tuple(None if d is None else _checked(_as(o, d), m, name) for o, d, m in zip(out, dtypes, metas))
    if isinstance(out, (tuple, list)):
        raise LoweringError(f"lowering {name} returned {len(out)} outputs, expected one")
    return _checked(_as(out, dtypes), meta, name)


def _checked(x, meta, name):
    """A rule's result must have the shape torch's meta kernel gave the tensor: a value of
    another shape would be read as the wrong numbers (never silently)."""
    if isinstance(meta, Meta) and tuple(x.shape) != tuple(meta.shape):
        raise LoweringError(f"lowering {name} returned shape {tuple(x.shape)}, torch expects {tuple(meta.shape)}")
    return x


def _as(x, dtype):
    x = jnp.asarray(x)
    return x if x.dtype == dtype else x.astype(dtype)
