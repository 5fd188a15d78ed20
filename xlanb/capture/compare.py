"""`xlanb.compare()`: every op of a region also runs on a CPU twin, and the first op whose outputs
differ although its inputs agreed is named, with the user's line, its module and its phase.

While a region is open, `LazyTensor.__torch_dispatch__` is `_comparing_dispatch`: the op runs on
xla as it would without the region (lazy or eager, the same handler), then the same OpOverload
runs on the CPU twins of its xla arguments. A twin is a CPU tensor that aliases as the xla tensor
does: one per holder (an unaliased tensor, or the Storage its views share), views of it taken by
replaying the view chain. A tensor met without a twin gets one, its current value copied to the
CPU. Ops the autograd engine and optimizers run come through the same door, so backward and
`optimizer.step()` are compared like the forward.

Each op's outputs (its fresh results and the tensors it wrote) are kept twice: the xla value, as a
tensor holding the output's node (pending nodes become outputs of the graph that computes them,
and are never donated), and a CPU copy of the twin's. They are compared when the region ends. An
op whose outputs differ runs once more on the CPU, on the xla values of its inputs (kept as the
op read them, `_Input`): when that gives the xla outputs, the op computes as the CPU does and its
difference came in with its inputs ("inherited", also when they differed by less than the
tolerance, which a product can scale past it); when it does not, the op itself computes
differently ("introduced"). On a TPU, float32's default tolerance is wider (`_WIDENED`).

Not compared: random ops and ops whose outputs are uninitialized (`empty_like`): their twins take
the xla values, so later ops stay comparable; ops the CPU cannot run (their twins too).
"""

from __future__ import annotations

import math
import weakref

import torch

from xlanb import events
from xlanb.capture import realize
from xlanb.capture.dispatch import dispatch
from xlanb.capture.frames import user_location
from xlanb.capture.nodes import current_scope
from xlanb.capture.scopes import recording_modules
from xlanb.capture.tensor import LazyTensor, base_node, new_tensor, view_chain
from xlanb.ir.graph import location_text
from xlanb.lower.fallback import run_on_cpu
from xlanb.lower.torch_versions import float32_matmul_precision
from xlanb.runtime.transfer import download
from xlanb.state import emit, runtime_state

_rt = runtime_state()
_in_backward = torch._C._current_graph_task_id
_current_node = torch._C._current_autograd_node
_sequence_nr = torch._C._autograd._get_sequence_nr
_SEEDED = torch.Tag.nondeterministic_seeded

# torch.testing.assert_close's defaults (rtol, atol) per dtype; integers and bool compare exactly
_TOLERANCES = {
    torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7), torch.complex32: (1e-3, 1e-5), torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}
# XLA:TPU computes float32 exp, log, tanh and the like with approximations (5e-6 to 3e-4 relative on
# a TPU v5e) where the CPU's are within an ulp or two: there torch's float32 defaults would name such
# ops as divergences in a correct model (docs/debugging.md). Its float64 agreed to 1e-11 or better:
# torch's defaults stand. The widening still tells a float32 product under "medium" precision (about
# 3e-3 relative) from one under "highest".
_WIDENED = {"tpu": {torch.float32: (1e-4, 1e-5), torch.complex64: (1e-4, 1e-5)}}
# ops whose float32 products follow torch.set_float32_matmul_precision (the hint names it)
_PRODUCTS = ("aten.mm.", "aten.bmm.", "aten.addmm.", "aten.baddbmm.", "aten.addbmm.", "aten.matmul.",
             "aten.linear.", "aten.dot.", "aten.mv.", "aten.einsum.", "aten.convolution.",
             "aten._convolution.", "aten.convolution_backward.", "aten.conv")
WINDOW = 4          # rows shown before the first divergence in `Comparison.table()`


class CompareError(RuntimeError):
    """A compare() region used where it cannot watch every op."""
    xlanb_user_error = True


class _Output:
    """One output of a compared op: the xla value (a tensor holding its node at the op), the view
    chain from that node to the output, and the CPU twin's value then."""
    __slots__ = ("xla", "chain", "cpu")

    def __init__(self, t: LazyTensor, cpu: torch.Tensor):
        node = base_node(t)
        self.xla = new_tensor(node, node.meta)       # pending: an output of the graph that computes it
        self.chain = view_chain(t)
        self.cpu = cpu.detach().clone()


class _Input:
    """A tensor argument as the xla op got it: the node holding its base value then, and the view
    chain from there (the op's own re-run on the CPU reads it: `Comparison._local`)."""
    __slots__ = ("node", "chain")

    def __init__(self, t: LazyTensor):
        self.node, self.chain = base_node(t), view_chain(t)


class _Op:
    __slots__ = ("op", "location", "module", "phase", "inputs", "outputs", "func", "xla_args", "xla_kwargs")


class Comparison:
    """The result of a `compare()` region (also its context manager).

    `rows`: one `events.CompareRow` per compared op, in program order; `first_divergence`: the
    first row whose outputs differ although its inputs agreed (None when none does); `ok`: no op
    differed; `skipped`: ops not compared (random, uninitialized, not runnable on the CPU)."""

    def __init__(self, rtol: float | None = None, atol: float | None = None):
        for name, v in (("rtol", rtol), ("atol", atol)):
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0):
                raise ValueError(f"xlanb.compare({name}=...) must be a number >= 0 or None, got {v!r}")
        self.rtol, self.atol = rtol, atol
        self.rows: list[events.CompareRow] = []
        self.first_divergence: events.CompareRow | None = None
        self.not_compared: dict[str, int] = {}     # "op: why" -> how many times
        self.precision = "highest"
        self._tolerances = _TOLERANCES      # per dtype, where rtol or atol is None (the platform's, at __enter__)
        self._widened = ""
        self._ops: list[_Op] = []
        self._twins: dict[int, tuple] = {}        # id(holder) -> (weakref to it, CPU tensor)
        self._writer: dict[int, int] = {}         # id(holder) -> index of the op that last wrote it
        self._origin: dict[int, str] = {}         # autograd sequence number -> forward op's location
        self._depth = 0
        self._refused = ""
        self._open = False
        self._saved = None

    @property
    def skipped(self) -> int:
        """Ops not compared (random, uninitialized, not runnable on the CPU): see `not_compared`."""
        return sum(self.not_compared.values())

    def skip(self, op: str, why: str) -> None:
        key = f"{op}: {why}"
        self.not_compared[key] = self.not_compared.get(key, 0) + 1

    @property
    def ok(self) -> bool:
        return self.first_divergence is None and not any(r.status != "ok" for r in self.rows)

    def __repr__(self) -> str:
        if self._open:
            return "<xlanb.compare: open>"
        first = self.first_divergence
        if first is None:
            return f"<xlanb.compare: {len(self.rows)} ops within tolerance, {self.skipped} not compared>"
        return (f"<xlanb.compare: first divergence at {first.op} {first.location} ({first.phase}), "
                f"max abs {first.max_abs:.3g}, max rel {first.max_rel:.3g}>")

    def table(self) -> str:
        """The rows around the first divergence, as text (all rows when there are few)."""
        rows = self.rows
        if self.first_divergence is not None and len(rows) > 24:
            i = self.first_divergence.index
            rows = rows[max(0, i - WINDOW):i + 12]
        lines = [f"{'#':>4}  {'op':<34} {'location':<22} {'module':<18} {'phase':<8} {'status':<10} "
                 f"{'max abs':>10} {'max rel':>10}"]
        for r in rows:
            lines.append(f"{r.index:>4}  {r.op:<34} {r.location:<22} {r.module:<18} {r.phase:<8} {r.status:<10} "
                         f"{r.max_abs:>10.3g} {r.max_rel:>10.3g}")
        return "\n".join(lines)

    # --- the region --------------------------------------------------------------------
    def __enter__(self) -> "Comparison":
        if self._open or self.rows:
            raise CompareError("this xlanb.compare() object was used already: open a new one")
        if _rt.comparing is not None:
            raise CompareError("xlanb.compare() inside another xlanb.compare() region: one region compares "
                               "every op already; end the outer one first")
        scope = _rt.compile_scope
        if scope is not None and getattr(scope, "replay", False):
            raise CompareError("xlanb.compare() inside a function compiled with xlanb.compile(replay=True): "
                               "a replayed call runs no Python ops to compare. Call the function's "
                               "__wrapped__ inside compare() instead")
        if torch.compiler.is_compiling():
            raise CompareError("xlanb.compare() inside torch.compile: the compiled graph runs as one program, "
                               "not op by op. Compare the uncompiled function (its ops are the same)")
        self.precision = float32_matmul_precision()
        platform = _rt.jax_device().platform
        if platform in _WIDENED and (self.rtol is None or self.atol is None):
            self._tolerances = {**_TOLERANCES, **_WIDENED[platform]}
            rtol, atol = _WIDENED[platform][torch.float32]
            dtypes = " and ".join(str(d).removeprefix("torch.") for d in _WIDENED[platform])
            self._widened = f"{dtypes} rtol {rtol:g}, atol {atol:g} on {platform.upper()}"
        self._modules = recording_modules()
        self._modules.__enter__()
        self._saved = LazyTensor.__torch_dispatch__
        LazyTensor.__torch_dispatch__ = classmethod(_comparing_dispatch)
        _rt.comparing = self
        self._open = True
        return self

    def __exit__(self, exc_type, exc, tb):
        self._close()
        if exc_type is not None:
            self._forget()
            return False
        if self._refused:
            self._forget()
            raise CompareError(self._refused)
        try:
            self._finish()
        finally:
            self._forget()
        return False

    def refuse(self, why: str) -> None:
        """Something ran in the region that compare cannot watch: raised now, or at the region's end
        when it happens inside the autograd engine (nothing may raise there)."""
        if _in_backward() == -1:
            raise CompareError(why)
        self._refused = self._refused or why

    def _close(self) -> None:
        self._open = False
        _rt.comparing = None
        LazyTensor.__torch_dispatch__ = self._saved
        self._modules.__exit__(None, None, None)

    def _forget(self) -> None:
        """No twin, snapshot or kept buffer outlives the region."""
        self._ops = []
        self._twins.clear()
        self._writer.clear()
        self._origin.clear()
        _rt.kept.clear()

    # --- twins -------------------------------------------------------------------------
    def _holder(self, t: LazyTensor):
        s = t._storage
        if s is None:
            return t
        # a tensor twinned while unaliased, aliased since (a view was taken): its twin is the base's
        moved = self._twins.pop(id(t), None)
        if moved is not None and moved[0]() is t and not t._views:
            self._twins[id(s)] = (weakref.ref(s), moved[1])
            if id(t) in self._writer:
                self._writer[id(s)] = self._writer.pop(id(t))
        return s

    def _twin(self, t: LazyTensor) -> torch.Tensor:
        holder = self._holder(t)
        entry = self._twins.get(id(holder))
        if entry is None or entry[0]() is not holder:
            base = self._read(t if holder is t else _base_of(t))
            entry = self._twins[id(holder)] = (weakref.ref(holder), base)
            self._writer.pop(id(holder), None)
        host = entry[1]
        for step in view_chain(t):
            host = step.on_host(host)
        return host

    def _read(self, t: LazyTensor) -> torch.Tensor:
        """t's current value on the CPU, laid out as t is (a compare read is not the user's)."""
        allowed, _rt.allow_execution = _rt.allow_execution, True
        try:
            node = realize.realize(t, "xlanb.compare: a twin for a tensor made before the region")
        finally:
            _rt.allow_execution = allowed
        return realize.with_layout(download(node.buffer, node.meta.shape), node.meta).clone()

    def _to_cpu(self, x, written: bool = False):
        return _map(x, lambda y: self._twin(y) if type(y) is LazyTensor else _cpu_argument(y, written))

    # --- one op ------------------------------------------------------------------------
    def before(self, func, args, kwargs):
        """Where the op comes from and its CPU arguments, taken before the xla op writes anything."""
        op = _Op()
        op.op = str(func)
        backward = _in_backward() != -1
        op.phase = "backward" if backward else "forward"
        location = user_location()
        where = location_text(location) if location else ""
        if backward:
            node = _current_node()
            if node is not None:
                where = self._origin.get(node._sequence_nr(), where)
        else:
            self._origin.setdefault(_sequence_nr() - 1, where)      # the autograd node made for this op
        op.location = where
        op.module = current_scope() or ""
        written = _written(func)
        cpu_args = tuple(self._to_cpu(a, i in written) for i, a in enumerate(args))
        cpu_kwargs = {k: self._to_cpu(v, k in written) for k, v in (kwargs or {}).items()}
        inputs = []
        for x in _tensors((args, kwargs)):
            w = self._writer.get(id(self._holder(x)))
            if w is not None:
                inputs.append(w)
        op.inputs = tuple(inputs)
        op.func = func
        op.xla_args, op.xla_kwargs = _snapshot(args), _snapshot(kwargs or {})
        for i in written:           # the values it overwrites: kept from now on (an eager op could donate them)
            snap = op.xla_kwargs.get(i) if isinstance(i, str) else op.xla_args[i] if i < len(args) else None
            for x in _inputs(snap):
                _rt.kept.add(x.node)
        return op, written, cpu_args, cpu_kwargs

    def after(self, func, args, kwargs, out, plan) -> None:
        op, written, cpu_args, cpu_kwargs = plan
        written_tensors = [x for i, a in enumerate(args) if i in written for x in _tensors(a)]
        written_tensors += [x for k, v in (kwargs or {}).items() if k in written for x in _tensors(v)]
        fresh = list(_tensors(_fresh_returns(func, out)))
        if func.is_view or (not fresh and not written_tensors):
            for x in _tensors((args, kwargs, out)):
                self._holder(x)
            return
        why = None
        if _SEEDED in func.tags:
            why = "random: its twin takes the xla values"
        elif op.op.startswith(("aten.empty", "aten.new_empty")):
            why = "its outputs are uninitialized"
        else:
            try:
                cpu_out = run_on_cpu(func, cpu_args, cpu_kwargs)
            except Exception as error:
                why = f"the CPU cannot run it ({type(error).__name__}: {str(error).splitlines()[0][:120]})"
        cpu_fresh = [] if why else list(_cpu_tensors(_fresh_returns(func, cpu_out)))
        if not why and len(cpu_fresh) != len(fresh):
            why = "its CPU outputs are not the xla outputs' structure"
        if why:                            # not compared: the twins take the xla values
            self.skip(op.op, why)
            for w in written_tensors:
                self._twin(w).copy_(self._read_view(w))
                self._writer.pop(id(self._holder(w)), None)
            for o in fresh:
                self._twins[id(o)] = (weakref.ref(o), self._read(o))
            return
        index = len(self._ops)
        outputs = []
        for w in written_tensors:
            outputs.append(_Output(w, self._twin(w)))
            self._writer[id(self._holder(w))] = index
        for o, c in zip(fresh, cpu_fresh):
            self._twins[id(o)] = (weakref.ref(o), c)
            outputs.append(_Output(o, c))
            self._writer[id(o)] = index
        for out_ in outputs:
            _rt.kept.add(base_node(out_.xla))
        for x in _inputs((op.xla_args, op.xla_kwargs)):
            _rt.kept.add(x.node)
        op.outputs = outputs
        self._ops.append(op)

    def _read_view(self, t: LazyTensor) -> torch.Tensor:
        host = self._read(_base_of(t) if t._storage is not None else t)
        for step in view_chain(t):
            host = step.on_host(host)
        return host

    # --- the end -----------------------------------------------------------------------
    def _finish(self) -> None:
        """Computes what is still pending of the compared values (one graph), compares, emits."""
        pending = [base_node(o.xla) for op in self._ops for o in op.outputs]
        pending += [x.node for op in self._ops for x in _inputs((op.xla_args, op.xla_kwargs))]
        roots = [n for n in dict.fromkeys(pending) if n.buffer is None]
        if roots:
            realize.execute(roots, name="xlanb_compare", eager=False, cause="xlanb.compare: the region's values",
                            donate=False)
        differs: list[bool] = []
        for i, op in enumerate(self._ops):
            xla = [_host_value(base_node(o.xla), o.chain) for o in op.outputs]
            worst_abs, worst_rel, close = 0.0, 0.0, True
            for x, o in zip(xla, op.outputs):
                a, r, c = _errors(x, o.cpu, self.rtol, self.atol, self._tolerances)
                worst_abs, worst_rel, close = max(worst_abs, a), max(worst_rel, r), close and c
            if close:
                status = "ok"
            else:
                faithful = self._local(op, xla)
                if faithful is None:        # the CPU could not re-run it: judged by its inputs alone
                    faithful = any(differs[j] for j in op.inputs)
                status = "inherited" if faithful else "introduced"
            differs.append(not close)
            first = op.outputs[0].cpu
            row = events.CompareRow(index=i, op=op.op, location=op.location, module=op.module, phase=op.phase,
                                    status=status, max_abs=worst_abs, max_rel=worst_rel,
                                    shape=tuple(first.shape), dtype=str(first.dtype).replace("torch.", ""))
            self.rows.append(row)
            if status == "introduced" and self.first_divergence is None:
                self.first_divergence = row
        first = self.first_divergence
        emit(events.Compared(rows=tuple(self.rows), first=None if first is None else first.index,
                             rtol=self.rtol, atol=self.atol, skipped=self.skipped, precision=self.precision,
                             hint=_hint(first, self.precision), widened=self._widened))

    def _local(self, op: _Op, xla: list) -> bool | None:
        """Whether the op's CPU kernel, given the very values the xla op read, gives the xla op's
        outputs (within tolerance). True: the op computes as the CPU does, and its outputs differ
        because its inputs did, if only below the tolerance (a product scales an absolute error);
        False: the op itself computes other values, so a difference starts here. None: the CPU could
        not run it."""
        hosts: dict = {}            # one host copy per base node: arguments that alias still alias

        def leaf(x):
            if type(x) is not _Input:
                return _cpu_argument(x, True)
            base = hosts.get(x.node)
            if base is None:
                base = hosts[x.node] = _host_value(x.node, ()).clone()
            for step in x.chain:
                base = step.on_host(base)
            return base

        func = op.func
        written = _written(func)
        try:
            args, kwargs = _map(op.xla_args, leaf), _map(op.xla_kwargs, leaf)
            out = run_on_cpu(func, args, kwargs)
        except Exception:
            return None
        local = [x for i, a in enumerate(args) if i in written for x in _cpu_tensors(a)]
        local += [x for k, v in kwargs.items() if k in written for x in _cpu_tensors(v)]
        local += list(_cpu_tensors(_fresh_returns(func, out)))
        if len(local) != len(xla):
            return None
        return all(_errors(x, c, self.rtol, self.atol, self._tolerances)[2] for x, c in zip(xla, local))


def compare(rtol: float | None = None, atol: float | None = None) -> Comparison:
    """`with xlanb.compare() as cmp:` runs every op of the region on a CPU twin too and compares
    each op's outputs (None: torch.testing.assert_close's tolerances for each dtype)."""
    return Comparison(rtol, atol)


def _comparing_dispatch(cls, func, types, args=(), kwargs=None):
    region = _rt.comparing
    if region is None or region._depth:            # an op inside an op's own handler: the outer op is compared
        return dispatch(cls, func, types, args, kwargs)
    region._depth += 1
    try:
        try:
            plan = region.before(func, args, kwargs)
        except Exception:
            plan = None
        deferred = len(_rt.deferred)
        out = dispatch(cls, func, types, args, kwargs)
        if plan is not None and len(_rt.deferred) == deferred:
            try:
                region.after(func, args, kwargs, out, plan)
            except Exception as error:
                region.skip(str(func), f"xlanb.compare could not compare it: {type(error).__name__}: {error}")
        return out
    finally:
        region._depth -= 1


# --- helpers ---------------------------------------------------------------------------
def _written(func) -> set:
    """Positions and keyword names of the arguments the op writes (in-place self, out=)."""
    found = getattr(func, "_xlanb_written", None)
    if found is None:
        found = set()
        for i, a in enumerate(func._schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                found.add(a.name if a.kwarg_only else i)
        func._xlanb_written = found
    return found


def _fresh_returns(func, out) -> tuple:
    """The op's returns that are new tensors (not an alias of an argument: in-place self, out=)."""
    returns = func._schema.returns
    outs = out if len(returns) > 1 else (out,)
    return tuple(o for r, o in zip(returns, outs) if r.alias_info is None)


def _leaves(x, kind):
    """The leaves of type `kind` in nested tuples, lists and dicts, in order."""
    t = type(x)
    if t is kind:
        yield x
    elif t is tuple or t is list:
        for y in x:
            yield from _leaves(y, kind)
    elif t is dict:
        for y in x.values():
            yield from _leaves(y, kind)


def _tensors(x):
    return _leaves(x, LazyTensor)


def _cpu_tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (tuple, list)):
        for y in x:
            yield from _cpu_tensors(y)


def _base_of(t: LazyTensor) -> LazyTensor:
    """A tensor holding the base value of t's storage (for reading it)."""
    node = t._storage.node
    return new_tensor(node, node.meta)


def _map(x, leaf):
    """`x` (nested tuples, lists and dicts) with `leaf` applied to each other value in it."""
    t = type(x)
    if t is tuple or t is list:
        return t(_map(y, leaf) for y in x)
    if t is dict:
        return {k: _map(v, leaf) for k, v in x.items()}
    return leaf(x)


def _cpu_argument(x, written: bool):
    """A non-xla argument as the CPU op takes it: the xla device is the CPU, and a CPU tensor the op
    writes is a copy (the op must not write the user's tensor)."""
    if type(x) is torch.device and x.type == _rt.device.type:
        return torch.device("cpu")
    if written and isinstance(x, torch.Tensor):
        return x.clone()
    return x


def _snapshot(x):
    """`x` (an op's args or kwargs) with each xla tensor replaced by an `_Input` of it."""
    return _map(x, lambda y: _Input(y) if type(y) is LazyTensor else y)


def _inputs(x):
    return _leaves(x, _Input)


def _host_value(node, chain) -> torch.Tensor:
    """A computed node's value on the host, through a view chain."""
    host = realize.with_layout(download(node.buffer, node.meta.shape), node.meta)
    for step in chain:
        host = step.on_host(host)
    return host


def _errors(actual: torch.Tensor, expected: torch.Tensor, rtol, atol,
            defaults=_TOLERANCES) -> tuple[float, float, bool]:
    """(max abs error, max rel error, within tolerance): assert_close's rule, NaN equal to NaN; `defaults`
    (rtol, atol) per dtype where `rtol` or `atol` is None."""
    if actual.shape != expected.shape:
        return math.inf, math.inf, False
    if actual.numel() == 0:
        return 0.0, 0.0, True
    dtype = expected.dtype
    default = defaults.get(dtype, (0.0, 0.0))
    rt = default[0] if rtol is None else rtol
    at = default[1] if atol is None else atol
    wide = torch.complex128 if dtype.is_complex else torch.float64
    a, e = actual.detach().to(wide), expected.detach().to(wide)
    diff = (a - e).abs()
    both_nan = a.isnan() & e.isnan() if not dtype.is_complex else (a.isnan() & e.isnan())
    same_inf = (a == e)
    diff = torch.where(both_nan | same_inf, torch.zeros_like(diff), diff)
    diff = torch.where(diff.isnan(), torch.full_like(diff, math.inf), diff)
    size = e.abs()
    close = bool((diff <= at + rt * size).all())
    rel = torch.where(diff == 0, torch.zeros_like(diff), diff / size)
    return float(diff.max()), float(rel.max()), close


def _hint(first: events.CompareRow | None, precision: str) -> str:
    if first is None or not first.op.startswith(_PRODUCTS):
        return ""
    if first.dtype == "float32" and precision != "highest":
        return (f"{first.op} multiplies float32 under torch.set_float32_matmul_precision({precision!r}): XLA runs "
                "its products in reduced precision (one or three bfloat16 passes) where the CPU uses float32. "
                "torch.set_float32_matmul_precision('highest') makes them agree")
    if first.dtype in ("bfloat16", "float16"):
        return (f"{first.op} multiplies {first.dtype}: XLA and the CPU round and accumulate its products "
                "differently; compare in float32, or pass a larger rtol")
    return ""
