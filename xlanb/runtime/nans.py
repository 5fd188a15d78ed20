"""debug_nans: one NaN flag per graph, and the op that made the NaN (docs/debugging.md).

While `debug_nans` is on, every graph runs with `nan_check` in its key (ir/graph.py): its executable
also returns one boolean, "a float output may hold a NaN" (one reduction of each float output, less those
another checked output is computed from elementwise, such as a gradient read through the parameter its
update writes; in the same program: see `checked_roots` and `_nan_hint`), and donates nothing, so its inputs can be read again. The flag is
not read at the launch, which would make the host wait for the graph and lose the overlap of a
training loop's next trace with this step's execution (W3 without a wait per step: 1.6x): the
launch leaves a `Pending` check in `runtime_state().nan_checks`, and capture reads the flags, oldest
first, as it reads index checks (capture/bounds.py): a sync reads those whose graph has finished,
`sync(wait=True)` and a value read all of them, an eager op its own at once. When a flag is set, the
outputs are checked exactly (`_holds_nan`); when one holds a NaN, the graph runs once more as a probe
that returns, for every node in program order, whether its output holds a NaN (the graph's roots keep
their operands until their flag is read: `Pending`), and the first op whose
output does although its operands held none is named with the user's line and module path (recorded
while debug_nans is on: capture/nans.py). Inf is not a NaN; integer and bool values are not checked.

The error is not raised here: it waits in `runtime_state().nan_error` until the caller has stored
the graph's outputs, so the pending work stays valid (capture raises it).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from xlanb.ir.graph import Graph, location_text
from xlanb.ir.node import Meta, Node, Scalar
from xlanb.lower.to_jax import build_function
from xlanb.runtime.outside import jax_entry
from xlanb.runtime.stages import cpu_dot_kernels, run_jitted
from xlanb.state import runtime_state

_rt = runtime_state()


class NanError(FloatingPointError):
    """A graph's float outputs held a NaN; the message names the op that made it."""
    xlanb_user_error = True      # a verdict on the program: its traceback ends at the user's line


def _checked_meta(meta) -> bool:
    return isinstance(meta, Meta) and (meta.dtype.is_floating_point or meta.dtype.is_complex)


def _has_nan(value, meta):
    """A traced boolean: `value` (one output, or a multi-output op's tuple) holds a NaN in a float part."""
    if isinstance(meta, tuple):
        flags = [_has_nan(v, m) for v, m in zip(value, meta) if v is not None]
        return jnp.any(jnp.stack(flags)) if flags else jnp.bool_(False)
    if not _checked_meta(meta):
        return jnp.bool_(False)
    return jnp.isnan(value).any()


def _nan_hint(x, by_rows: bool):
    """A traced boolean, set when float array `x` holds a NaN (never missed) and, rarely, when it does not.
    A sum propagates NaN, where a max does not always (XLA's vectorized CPU max drops a NaN:
    lower/rules/reduce.py's nan_reduce), and costs a third of a max, a twelfth of isnan(x).any(). On
    the CPU with its own kernels (`by_rows`: stages.cpu_dot_kernels) a matrix `x` is summed by a
    matrix-vector product with ones, Eigen's vectorized GEMV, then its column of row sums: XLA's own
    CPU reductions read at a fraction of the memory's speed (W3's f32[512,784] update: the sum +176 us
    a step on a 120 us update, the product +15 us; `_by_rows` says which shapes). It is also set when
    the sum meets inf - inf (an output holding both infinities, or overflowing partial sums), which
    `check` then rules out exactly. Floats narrower than 32 bits are summed in float32, where their
    partial sums rarely overflow."""
    if x.dtype in (jnp.float32, jnp.float64):
        if by_rows and _by_rows(x.shape):
            return jnp.isnan(jnp.sum(jnp.matmul(x, jnp.ones(x.shape[1], x.dtype), precision="highest")))
        return jnp.isnan(jnp.sum(x))
    if x.dtype in (jnp.complex64, jnp.complex128):
        return jnp.isnan(jnp.sum(x))
    return jnp.isnan(jnp.sum(x, dtype=jnp.float32))


def _by_rows(shape) -> bool:
    """A matrix that a matrix-vector product sums faster than XLA's reduction: rows of 64 to 4096
    elements, 16 rows or more. Matrices only: XLA computes the elementwise producer of an output
    again into a buffer of its own for a product through a reshape (f32[1000000] as 1000 x 1000:
    +201 us, as a sum +200 us)."""
    return len(shape) == 2 and 64 <= shape[1] <= 4096 and shape[0] >= 16


def _holds_nan(arrays):
    """Whether any of the float `arrays` holds a NaN, exactly: run only when a graph's flag was set."""
    return jnp.any(jnp.stack([jnp.isnan(a).any() for a in arrays]))


# Ops whose output holds a NaN wherever a tensor operand does, at every element of that operand
# (elementwise arithmetic that IEEE propagates NaN through, even times 0, and layout ops that keep
# every element): a root computed from another root through a chain of these needs no check of its
# own. Packet names: every overload behaves alike, but for `_REINTERPRETS` (a float16 NaN's bits seen
# as a float32 are a number).
_CARRIES_NAN = frozenset(f"aten.{op}" for op in (
    "add", "sub", "mul", "div", "neg", "addcmul", "addcdiv", "lerp", "sqrt", "rsqrt", "exp", "log",
    "reciprocal", "clone", "_to_copy", "alias", "detach", "view", "_unsafe_view", "reshape", "t",
    "permute", "transpose", "unsqueeze", "squeeze", "expand"))
_REINTERPRETS = frozenset({"aten.view.dtype"})
# The multi-tensor (`_foreach_*`) forms of those ops, which optimizers use by default: output i holds
# every NaN of element i of each list argument, and of a one-element tensor argument (`.Tensor`
# overloads: `_foreach_mul_(params, lr_tensor)`), which every output element meets.
_FOREACH_CARRIES_NAN = frozenset(f"aten._foreach_{op}" for op in (
    "add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "sqrt", "rsqrt", "exp", "log", "neg",
    "reciprocal", "clone"))


def _real_float(meta) -> bool:
    return isinstance(meta, Meta) and meta.dtype.is_floating_point and meta.numel > 0


def checked_roots(graph: Graph) -> list[int]:
    """The positions of the roots the flag reduces: every non-empty float root, less those that
    another checked root is computed from through a chain of `_CARRIES_NAN` ops or outputs of
    `_FOREACH_CARRIES_NAN` ops (`_carried`; a NaN in such a
    root is a NaN in that one: a step's gradients feed its parameters' update through add and mul,
    so only the parameters are read). Exact either way: a set flag makes `check` read every output."""
    metas = [r.meta for r in graph.roots]
    wanted = [i for i, m in enumerate(metas) if _checked_meta(m) and m.numel]
    roots = {graph.roots[i] for i in wanted if _real_float(metas[i])}
    if len(roots) < 2:
        return wanted
    consumers: dict[Node, list[Node]] = {}
    for n in graph.order:
        if n.buffer is None and _real_float(n.meta):
            for o in _carried(n):
                if type(o) is Node and _real_float(o.meta):
                    consumers.setdefault(o, []).append(n)
    reaches: dict[Node, bool] = {}      # its NaN reaches a checked root (itself one included)
    for n in reversed(graph.order):     # consumers before their operands
        reaches[n] = any(reaches[c] for c in consumers.get(n, ())) or n in roots
    return [i for i in wanted if graph.roots[i] not in roots
            or not any(reaches[c] for c in consumers.get(graph.roots[i], ()))]


def _carried(n: Node):
    """The operands each of whose NaNs `n`'s output holds: all of a `_CARRIES_NAN` op's; for one output
    of a `_FOREACH_CARRIES_NAN` op (`xlanb.getitem(whole, i)`), element i of each list argument and a
    one-element tensor argument (a longer one, addcdiv's per-element `scalars`, reaches one output
    per element: not carried); none for any other op."""
    if n.name.rsplit(".", 1)[0] in _CARRIES_NAN and n.name not in _REINTERPRETS:
        return n.operands
    if n.name == "xlanb.getitem":
        whole, i = n.args
        if type(whole) is Node and whole.buffer is None and whole.name.rsplit(".", 1)[0] in _FOREACH_CARRIES_NAN:
            return [a[i] if isinstance(a, (list, tuple)) else a for a in whole.args
                    if (len(a) > i if isinstance(a, (list, tuple)) else type(a) is Node and _one_element(a.meta))]
    return ()


def _one_element(meta) -> bool:
    return isinstance(meta, Meta) and meta.numel == 1


def with_nan_flag(fn, graph: Graph):
    """`fn` (the graph's function) returning one more output: whether any float root holds a NaN."""
    checked = checked_roots(graph)
    by_rows = cpu_dot_kernels()

    def checking(*args):
        outs = fn(*args)
        flags = [_nan_hint(outs[i], by_rows) for i in checked]
        return (*outs, jnp.any(jnp.stack(flags)) if flags else jnp.bool_(False))
    checking.__name__ = checking.__qualname__ = fn.__name__
    return checking


@dataclasses.dataclass(eq=False)
class Pending:
    """A checked launch whose flag is not read yet: what naming its NaN's op needs. Its roots keep
    their operands until the flag is read (capture stores them with `Node.release(forget=False)`, and
    so does every later checked graph: an eager op's check reads every pending flag first), so that the
    probe can run the graph again; `examine` then forgets them."""
    graph: Graph
    flag: jax.Array
    outs: tuple
    args: list


def check(graph: Graph, outs: tuple, args: list, *, now: bool) -> tuple:
    """The roots' outputs of a checked launch (its flag taken off). The flag is read now (an eager op),
    else by `examine` later; a NaN's op is kept in `runtime_state().nan_error` for capture to raise."""
    outs, flag = outs[:-1], outs[-1]
    if graph.key.shardings and not flag.is_fully_addressable:   # over several processes: each holds the answer
        flag = flag.addressable_data(0)
    _rt.nan_checks.append(Pending(graph, flag, outs, args))
    if now:
        examine(ready_only=False)
    return outs


@jax_entry
def examine(ready_only: bool) -> None:
    """Reads the flags of the pending checks, oldest first (with ready_only, only while their graph
    has finished: no wait). The first NaN found goes to `runtime_state().nan_error`; the later
    checks are dropped then (their graphs read that NaN's results)."""
    checks = _rt.nan_checks
    while checks and _rt.nan_error is None:
        c = checks[0]
        if ready_only and not c.flag.is_ready():
            return
        del checks[0]
        if np.asarray(c.flag):                          # one host read (np.asarray: 1 us, bool(): 10 us)
            floats = [o for o, r in zip(c.outs, c.graph.roots) if _checked_meta(r.meta) and r.meta.numel]
            if np.asarray(run_jitted(_holds_nan, floats)):          # not only inf - inf in a sum
                _rt.nan_error = _name_op(c)
        _forget(c)
    if _rt.nan_error is not None:
        for c in checks:
            _forget(c)
        checks.clear()


def _forget(c: Pending) -> None:
    """The check's roots forget their operands, as unchecked roots do when stored (Node.release)."""
    for r in c.graph.roots:
        if r.buffer is not None:
            r.release(r.buffer)


def _name_op(c: Pending) -> NanError:
    """find_nan_op on the graph as it was launched: its op nodes computed again by the probe (the
    roots still know their operands: Pending)."""
    inputs = set(c.graph.inputs)
    ops = [(n, n.buffer) for n in c.graph.order if n not in inputs]
    try:
        for n, _ in ops:
            n.buffer = None
        return find_nan_op(c.graph, c.args)
    finally:
        for n, buffer in ops:
            n.buffer = buffer


@jax_entry
def find_nan_op(graph: Graph, args: list) -> NanError:
    """Runs `graph` (before its roots are released: its nodes still know their operands) on the same
    `args` with every node's output checked, and words the first op that made a NaN."""
    flags = _probe(graph, args)
    index = {n: i for i, n in enumerate(graph.order)}
    for i, n in enumerate(graph.order):
        if n.buffer is None and flags[i] and not any(type(o) is Node and flags[index[o]] for o in n.operands):
            return NanError(_op_message(n, i, graph))
    held = [k for k, n in enumerate(graph.inputs) if flags[index[n]]]
    if held:
        source = graph.inputs[held[0]]
        first = next((n for n in graph.order if n.buffer is None and any(o is source for o in n.operands)), None)
        read = f" (first read by {first.name}{_where(first)})" if first is not None else ""
        return NanError(
            f"NaN in graph '{graph.name}': its input {held[0]} ({source.meta.text}) already held NaN before the graph "
            f"ran{read}; no op of this graph made it. "
            f"It came from earlier work: a graph before this one (with debug_nans on it would have raised there), "
            f"or a tensor made with NaN (torch.tensor, a load, uninitialized memory from torch.empty).")
    return NanError(
        f"NaN in the outputs of graph '{graph.name}', but no op's output held one when the graph ran again op by op "
        f"(XLA fused it differently). Split the graph with xlanb.sync() or use eager mode to narrow it down.")


def _probe(graph: Graph, args: list) -> np.ndarray:
    """One boolean per node of `graph.order`: its output holds a NaN (inputs included)."""
    probe = dataclasses.replace(graph, roots=list(graph.order))
    fn, _, _ = build_function(probe)
    metas = [n.meta for n in graph.order]

    def flags(*arrays):
        return jnp.stack([_has_nan(v, m) for v, m in zip(fn(*arrays), metas)])
    return np.asarray(run_jitted(flags, *args))


def _where(n: Node) -> str:
    """` at test.py:12 (module 'blocks.0.mlp')`, as much of it as was recorded."""
    notes = [f"module '{n.scope or '<top>'}'"] if n.scope is not None else []
    if not n.location:      # the autograd engine runs backward ops with none of the user's frames on the stack
        notes.append("no line of yours: a backward op, or one recorded before debug_nans was on")
        return f" ({'; '.join(notes)})"
    line = location_text(n.location)
    namer = _rt.location_namer
    return f" at {namer(line) if namer is not None else line}" + (f" ({notes[0]})" if notes else "")


def _op_message(n: Node, pos: int, graph: Graph) -> str:
    nan_number = any(type(o) is Scalar and o.value != o.value for o in n.operands)
    inputs = "its tensor inputs held none (a Python number passed to it is NaN)" if nan_number else "its inputs held none"
    return (f"NaN produced by {n.name}{_where(n)} in graph '{graph.name}' (op %{pos}): its output holds a NaN "
            f"although {inputs}. Look at what that op gets (sqrt or log of a negative number, 0/0, inf - inf, an "
            f"overflow to inf before it); xlanb.compare() runs each op on a CPU twin too. The tensors keep the values "
            f"computed, NaN included.")
