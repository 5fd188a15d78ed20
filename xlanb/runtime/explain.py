"""Why did it recompile? A new key is compared with the nearest earlier key of its name.

The CacheKey (ir/graph.py) is a record of named ingredients; a miss is explained by the
ingredients that differ: an input's shape, dtype or layout, an op, its constants, its
output shape or its operand wiring, the outputs, the lifted scalars' kinds, the donated
inputs, the shardings, the float32 matmul precision, debug_nans. A key equal to an earlier one was
evicted from the in-memory cache (or the cache was cleared): that, and only that, is said so.
"""

from __future__ import annotations

import collections

from xlanb.events import Change, Recompile
from xlanb.ir.graph import CacheKey, Graph, location_text
from xlanb.ir.node import NODE, Meta, meta_text
from xlanb.state import runtime_state

HISTORY = 8     # earlier keys kept per graph name
SHARDINGS_SHOWN = 3     # sharding changes named one by one; the rest are counted

_rt = runtime_state()


def explain(graph: Graph, frames=()) -> Recompile | None:
    """The explanation of `graph`'s compile (None for the first graph of its name); remembers its key.
    `frames` (innermost first) are the user's frames that made it run."""
    key = graph.key
    earlier = _rt.history.setdefault(graph.name, collections.deque(maxlen=HISTORY))
    result = None
    if earlier:
        nearest = min(earlier, key=lambda k: _distance(k, key))
        where = location_text((frames[0].filename, frames[0].lineno)) if frames else ""
        changes = diff(nearest, key, graph)
        hint = growth(list(earlier), key)
        if hint is not None:
            changes.append(hint)
        result = Recompile(graph.name, nearest.digest(), tuple(changes), where)
    if key not in earlier:
        earlier.append(key)
    return result


def growth(previous: list[CacheKey], key: CacheKey) -> Change | None:
    """The "growth" hint: an input whose one dim grew by exactly 1 at each of the last two compiles of
    graphs of the key's structure (as many inputs and ops: a KV cache or a token buffer appended to
    each call), so every length compiles its own graph. Graphs of other structures that compile in
    between (a mask check each step) are passed over."""
    new = _inputs(key)
    ops = _op_names(key)
    same = [k for k in previous if len(_inputs(k)) == len(new) and _op_names(k) == ops]
    if len(same) < 2:
        return None
    older, last = (_inputs(k) for k in same[-2:])
    for i, (a, b, c) in enumerate(zip(older, last, new)):
        d = _grown_dim(a, b)
        if d is not None and _grown_dim(b, c) == d:
            return Change("growth", i, b.text, c.text, str(d))
    return None


def _op_names(key: CacheKey) -> list:
    """The key's ops, by name and operands (their constants and shapes left out)."""
    return [(e[0][0], e[1]) if type(e) is tuple and e and type(e[0]) is tuple else e for e in _ops(key)]


def _grown_dim(a: Meta, b: Meta) -> int | None:
    """The dim in which b is a one larger than a (None: not exactly that)."""
    if a.dtype is not b.dtype or len(a.shape) != len(b.shape):
        return None
    grown = [d for d, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
    return grown[0] if len(grown) == 1 and b.shape[grown[0]] == a.shape[grown[0]] + 1 else None


def _inputs(key: CacheKey) -> list[Meta]:
    return [e for e in key.entries if type(e) is Meta]


def _ops(key: CacheKey) -> list[tuple]:
    return [e for e in key.entries if type(e) is not Meta]


def _input_text(m: Meta, other: Meta) -> str:
    if m.text != other.text:
        return m.text
    return f"{m.text} strides {m.strides}" + (f" offset {m.offset}" if m.offset else "")


def _output_text(m, other) -> str:
    """An op's output meta; with its strides when only the layout differs."""
    if type(m) is Meta and type(other) is Meta:
        return _input_text(m, other)
    return meta_text(m)


def _constants(lk) -> str:
    def show(x):
        if x is NODE:
            return "%"
        if isinstance(x, type):
            return f"<{x.__name__}>"
        if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], type):
            return repr(x[1])
        if isinstance(x, tuple):
            return "(" + ", ".join(show(y) for y in x) + ")"
        return repr(x)
    args = show(lk[1])
    return args if lk[2] is None else f"{args} {show(lk[2])}"


def _without_scalar_kinds(x):
    """Constants with each lifted scalar's kind (`<float>`) blanked: the "scalar" change names it.
    A baked number stays (kind, value), as `show` reads it."""
    if isinstance(x, type):
        return type
    if isinstance(x, tuple) and not (len(x) == 2 and isinstance(x[0], type)):
        return tuple(_without_scalar_kinds(y) for y in x)
    return x


def _sharing_text(key: CacheKey) -> str:
    return f"{len(key.scalars)} values in {len(key.scalar_uses)} uses, shared as {key.scalar_uses}"


def _donation_text(donate: tuple) -> str:
    return "inputs " + ", ".join(map(str, donate)) if donate else "none"


def diff(before: CacheKey, after: CacheKey, graph: Graph | None = None) -> list[Change]:
    """The ingredients of `after` that differ from `before`, each named once (first op of a kind)."""
    changes: list[Change] = []
    ins_a, ins_b = _inputs(before), _inputs(after)
    for i, (a, b) in enumerate(zip(ins_a, ins_b)):
        if a is not b:
            changes.append(Change("input", i, _input_text(a, b), _input_text(b, a)))
    if len(ins_a) != len(ins_b):
        changes.append(Change("inputs", len(ins_b), f"{len(ins_a)} inputs", f"{len(ins_b)} inputs"))
    # an input's new type explains the ops' new shapes; a new input count does not explain wiring
    changes += _op_changes(before, after, graph, input_changed=any(c.kind == "input" for c in changes))
    if len(before.roots) != len(after.roots):
        changes.append(Change("outputs", 0, str(len(before.roots)), str(len(after.roots))))
    elif before.roots != after.roots and not changes:
        changes.append(Change("outputs", 0, f"ops {before.roots}", f"ops {after.roots}"))
    for i, (a, b) in enumerate(zip(before.scalars, after.scalars)):
        if a is not b:
            changes.append(Change("scalar", i, a.__name__, b.__name__))
            break
    if len(before.scalars) != len(after.scalars):
        changes.append(Change("scalars", 0, str(len(before.scalars)), str(len(after.scalars))))
    elif before.scalar_uses != after.scalar_uses and not changes:
        changes.append(Change("scalars", 0, _sharing_text(before), _sharing_text(after)))
    if before.donate != after.donate:
        changes.append(Change("donation", 0, _donation_text(before.donate), _donation_text(after.donate)))
    if before.recycled != after.recycled:
        changes.append(Change("donation", 0, f"{len(before.recycled)} buffers recycled",
                              f"{len(after.recycled)} buffers recycled (a replayed step's previous gradients)"))
    changes += _sharding_changes(before, after)
    if before.matmul_precision != after.matmul_precision:
        changes.append(Change("precision", 0, before.matmul_precision, after.matmul_precision))
    if before.compile_effort != after.compile_effort:
        changes.append(Change("effort", 0, before.compile_effort, after.compile_effort))
    if before.platform != after.platform:
        changes.append(Change("platform", 0, before.platform or "JAX's default", after.platform or "JAX's default"))
    if before.nan_check != after.nan_check:
        changes.append(Change("debug_nans", 0, "on" if before.nan_check else "off", "on" if after.nan_check else "off"))
    if not changes and before == after:
        if _rt.cache.was_cleared(after):
            changes.append(Change("cleared", 0, "", "the in-memory cache was cleared since"))
        else:       # compiled before and not cleared: the LRU dropped it (maybe long ago)
            changes.append(Change("evicted", 0, "", f"cache size {_rt.cache.limit}"))
    return changes


def _sharding_changes(before: CacheKey, after: CacheKey) -> list[Change]:
    """`input 3 sharding: one device -> ('data', None) on mesh data=8`; an empty ingredient is one device."""
    if before.shardings == after.shardings:
        return []
    n = min(len(_inputs(before)), len(_inputs(after)))
    changes = []
    for i in range(n):
        a = before.shardings[i] if before.shardings else None
        b = after.shardings[i] if after.shardings else None
        if a != b:
            changes.append(Change("sharding", i, str(a) if a is not None else "one device",
                                  str(b) if b is not None else "one device"))
    if len(changes) > SHARDINGS_SHOWN:      # a whole model moved: name a few inputs, count the rest
        more = len(changes) - SHARDINGS_SHOWN
        changes = changes[:SHARDINGS_SHOWN] + [Change("shardings", more, "", f"{more} more inputs")]
    return changes


def _op_changes(before: CacheKey, after: CacheKey, graph: Graph | None, input_changed: bool) -> list[Change]:
    ops_a, ops_b = _ops(before), _ops(after)
    locations = _op_locations(graph) if graph is not None else None

    def where(i: int) -> str:
        return locations[i] if locations is not None and i < len(locations) else ""

    first: dict[str, Change] = {}
    for i, ((lk_a, pos_a), (lk_b, pos_b)) in enumerate(zip(ops_a, ops_b)):
        if lk_a[0] != lk_b[0]:
            first.setdefault("op", Change("op", i, lk_a[0], lk_b[0], where(i)))
        elif _without_scalar_kinds(lk_a[1:3]) != _without_scalar_kinds(lk_b[1:3]):
            first.setdefault("constant", Change("constant", i, f"{lk_a[0]} {_constants(lk_a)}",
                                                f"{lk_b[0]} {_constants(lk_b)}", where(i)))
        elif lk_a[3] != lk_b[3]:
            first.setdefault("shape", Change("shape", i, f"{lk_a[0]} {_output_text(lk_a[3], lk_b[3])}",
                                             f"{lk_b[0]} {_output_text(lk_b[3], lk_a[3])}", where(i)))
        elif pos_a != pos_b:
            first.setdefault("operands", Change("operands", i, _call_text(lk_b[0], pos_a, _labels(before)),
                                                _call_text(lk_b[0], pos_b, _labels(after)), where(i)))
    if "op" not in first and len(ops_a) != len(ops_b):
        i = min(len(ops_a), len(ops_b))
        a = ops_a[i][0][0] if i < len(ops_a) else "end of graph"
        b = ops_b[i][0][0] if i < len(ops_b) else "end of graph"
        first["op"] = Change("op", i, a, b, where(i))
    changes = [first[k] for k in ("op", "constant") if k in first]
    if "shape" in first and not input_changed:        # an input's new shape explains the ops' shapes
        changes.append(first["shape"])
    if "operands" in first and not changes and not input_changed:
        changes.append(first["operands"])
    return changes


def _labels(key: CacheKey) -> list[str]:
    """Each post-order position named as the explanation counts: `input k` or `op j`."""
    labels, inputs, ops = [], 0, 0
    for e in key.entries:
        if type(e) is Meta:
            labels.append(f"input {inputs}")
            inputs += 1
        else:
            labels.append(f"op {ops}")
            ops += 1
    return labels


def _call_text(name: str, positions: tuple, labels: list[str]) -> str:
    return f"{name}({', '.join(labels[p] for p in positions)})"


def _op_locations(graph: Graph) -> list[str]:
    return [location_text(n.location) for n in graph.order if n.buffer is None]


def _distance(a: CacheKey, b: CacheKey) -> int:
    d = 0
    for x, y in ((_inputs(a), _inputs(b)), (_ops(a), _ops(b))):
        d += sum(p != q for p, q in zip(x, y)) + abs(len(x) - len(y))
    return (d + (a.donate != b.donate) + (a.roots != b.roots) + (a.shardings != b.shardings)
            + (a.matmul_precision != b.matmul_precision) + (a.compile_effort != b.compile_effort)
            + (a.platform != b.platform))
