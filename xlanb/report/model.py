"""The cell report as data: what the lazy runtime did during one cell.

Every representation (widget, JSON for the JupyterLab extension, HTML, plain text) is
rendered from one CellReport, so they all show the same facts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from xlanb.report.format import format_call_ms, format_error, plural
from xlanb.report.schema import REPORT_SCHEMA_VERSION
from xlanb.report.where import Where


def _ms(ns: float) -> float:
    return round(ns / 1e6, 3)


@dataclasses.dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str

    @property
    def text(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype, "text": self.text}


@dataclasses.dataclass(frozen=True)
class IrText:
    """A graph's IR lines (ir.graph.IrLine), perhaps cut to the first `limit` nodes."""
    lines: tuple                 # IrLine
    nodes: int                   # all nodes, including the ones cut
    truncated: bool = False
    root_names: tuple = ()       # (root index, tensor name) for pending IR

    @property
    def text(self) -> str:
        names: dict[int, list[str]] = {}
        for i, name in self.root_names:
            names.setdefault(i, []).append(name)
        out = ["IR {"]
        for line in self.lines:
            held = [n for r in line.roots for n in names.get(r, ())]
            out.append(f"  {line.text()}" + (f"  # {', '.join(held)}" if held else ""))
        if self.truncated:
            out.append(f"  ... {self.nodes - len(self.lines)} more nodes")
        out.append("}")
        return "\n".join(out)

    def to_json(self) -> dict:
        lines = [dict(dataclasses.asdict(line), text=line.text()) for line in self.lines]
        for d in lines:
            d["operands"], d["roots"] = list(d["operands"]), list(d["roots"])
        return {"lines": lines, "text": self.text, "nodes": self.nodes, "truncated": self.truncated}


@dataclasses.dataclass(frozen=True)
class Dag:
    nodes: int                   # nodes in the graph
    drawn: int                   # boxes drawn (after collapsing)
    collapsed: str               # "none" | "groups" | "layers"
    svg: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class StageText:
    text: str
    lines: int
    truncated: bool

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Recompile:
    graph: str
    key: str
    against: str
    changes: tuple[dict, ...]    # kind, index, before, after, location, text

    @property
    def text(self) -> str:
        if not self.changes:
            return f"same ops and shapes as graph {self.against} (it was evicted from the cache)"
        return "; ".join(c["text"] for c in self.changes)

    def to_json(self) -> dict:
        return {"graph": self.graph, "key": self.key, "against": self.against, "text": self.text,
                "changes": [dict(c) for c in self.changes]}


@dataclasses.dataclass(frozen=True)
class GraphSection:
    """A graph compiled during the cell, with everything known about it."""
    name: str
    key: str
    eager: bool
    cause: str
    where: Where | None
    nodes: int
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    scalars: int
    lower_ms: float
    compile_ms: float
    persistent_hit: bool
    executions: int
    execute_ms: float
    fallback_ops: tuple[str, ...]
    recompile: Recompile | None
    ir: IrText
    dag: Dag | None = None
    stablehlo: StageText | None = None
    optimized: StageText | None = None
    cost: dict | None = None
    memory: dict | None = None
    modules: Any = None          # report.modules.ModuleView, when module scopes were recorded (1.2)
    fusions: tuple = ()          # report.fusions.Fusion of the optimized HLO (1.2)
    matmul_precision: str = "highest"    # torch's float32 matmul precision it was lowered at (1.6)
    compile_effort: str = "default"      # how hard XLA optimized it: default | fast (1.6)

    def to_json(self) -> dict:
        return {
            "modules": self.modules.to_json() if self.modules else None,
            "fusions": [f.to_json() for f in self.fusions],
            "name": self.name, "key": self.key, "eager": self.eager, "cause": self.cause,
            "where": self.where.to_json() if self.where else None, "nodes": self.nodes,
            "inputs": [t.to_json() for t in self.inputs], "outputs": [t.to_json() for t in self.outputs],
            "scalars": self.scalars, "lower_ms": self.lower_ms, "compile_ms": self.compile_ms,
            "persistent_hit": self.persistent_hit, "executions": self.executions,
            "execute_ms": self.execute_ms, "fallback_ops": list(self.fallback_ops),
            "matmul_precision": self.matmul_precision, "compile_effort": self.compile_effort,
            "recompile": self.recompile.to_json() if self.recompile else None,
            "ir": self.ir.to_json(), "dag": self.dag.to_json() if self.dag else None,
            "hlo": {"stablehlo": self.stablehlo.to_json() if self.stablehlo else None,
                    "optimized": self.optimized.to_json() if self.optimized else None},
            "cost": self.cost, "memory": self.memory,
        }


@dataclasses.dataclass(frozen=True)
class CachedRun:
    """A graph compiled before this cell and only executed in it."""
    name: str
    key: str
    executions: int
    execute_ms: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class EagerOp:
    op: str
    signature: str               # "f32[4,4], f32[4,4] -> f32[4,4]"
    compiles: int
    compile_ms: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class EagerSummary:
    ops: tuple[EagerOp, ...] = ()
    compiles: int = 0
    executions: int = 0
    compile_ms: float = 0.0
    execute_ms: float = 0.0

    def to_json(self) -> dict:
        return {"ops": [o.to_json() for o in self.ops], "compiles": self.compiles,
                "executions": self.executions, "compile_ms": self.compile_ms, "execute_ms": self.execute_ms}


@dataclasses.dataclass(frozen=True)
class Forced:
    """An execution forced by value access (lazy mode), or a full_graph violation."""
    kind: str                    # "value" | "violation"
    cause: str
    graph: str
    where: Where | None
    count: int = 1

    def to_json(self) -> dict:
        return {"kind": self.kind, "cause": self.cause, "graph": self.graph,
                "where": self.where.to_json() if self.where else None, "count": self.count}


@dataclasses.dataclass(frozen=True)
class FallbackNote:
    """An op that ran in torch on the CPU."""
    op: str                      # the torch_xla counter name, aten::<op>
    reason: str
    graphs: tuple[str, ...]
    where: Where | None
    count: int

    def to_json(self) -> dict:
        return {"op": self.op, "reason": self.reason, "graphs": list(self.graphs),
                "where": self.where.to_json() if self.where else None, "count": self.count}


@dataclasses.dataclass(frozen=True)
class PendingTensor:
    name: str
    type: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Failure:
    """The error that stopped a cell while it recorded: the op it failed in, where (1.2)."""
    error: str                   # "RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)"
    op: str                      # the ATen op being recorded ("aten.mm.default"), "" when not in an op
    where: Where | None
    highlight: tuple[int, ...]   # IR lines recorded at the failing line

    @property
    def text(self) -> str:
        op = f" in {self.op}" if self.op else ""
        at = f" at {self.where.text}" if self.where else ""
        return f"the cell failed{op}{at}: {self.error}"

    def to_json(self) -> dict:
        return {"error": self.error, "op": self.op, "where": self.where.to_json() if self.where else None,
                "highlight": list(self.highlight), "text": self.text}


@dataclasses.dataclass(frozen=True)
class PendingIR:
    """Pending IR left behind at the end of a cell (lazy mode), and the tensors holding it."""
    nodes: int
    tensors: tuple[PendingTensor, ...]
    unnamed: int
    ir: IrText
    dag: Dag | None = None
    modules: Any = None          # report.modules.ModuleView (1.2)
    failure: Failure | None = None   # the cell raised while recording: this is its partial graph (1.2)

    def to_json(self) -> dict:
        return {"nodes": self.nodes, "tensors": [t.to_json() for t in self.tensors], "unnamed": self.unnamed,
                "ir": self.ir.to_json(), "dag": self.dag.to_json() if self.dag else None,
                "modules": self.modules.to_json() if self.modules else None,
                "failure": self.failure.to_json() if self.failure else None}


@dataclasses.dataclass(frozen=True)
class Transfers:
    count: int = 0
    bytes: int = 0
    ms: float = 0.0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Summary:
    graphs_compiled: int = 0
    graphs_executed: int = 0
    eager_ops_compiled: int = 0
    eager_ops_executed: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    persistent_hits: int = 0
    lower_ms: float = 0.0
    compile_ms: float = 0.0
    execute_ms: float = 0.0
    syncs: int = 0
    replayed: int = 0            # replayed calls, counted in graphs_executed and cache_hits too (1.5)
    forced: int = 0
    fallbacks: int = 0
    to_device: Transfers = Transfers()
    from_device: Transfers = Transfers()

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["to_device"], d["from_device"] = self.to_device.to_json(), self.from_device.to_json()
        return d


@dataclasses.dataclass(frozen=True)
class Span:
    kind: str                    # "lower" | "compile" | "execute" | "transfer"
    name: str
    start_ms: float              # from the start of the cell
    ms: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Timeline:
    spans: tuple[Span, ...] = ()
    omitted: int = 0             # short spans left out to keep the report small
    svg: str = ""

    def to_json(self) -> dict:
        return {"spans": [s.to_json() for s in self.spans], "omitted": self.omitted, "svg": self.svg}


@dataclasses.dataclass(frozen=True)
class TorchCompile:
    """What torch.compile(backend="xlanb") did in the cell: FX graphs dynamo captured (and which
    path each took), graph breaks with their user lines, and frames captured again after a guard
    failed (schema 1.2)."""
    graphs: tuple[dict, ...] = ()       # name, kind, path, ops, inputs, reason, location
    breaks: tuple[dict, ...] = ()       # reason, location
    recaptures: tuple[dict, ...] = ()   # reason, location

    def lines(self) -> list[str]:
        out = []
        for g in self.graphs:
            how = "one lazy node per call" if g["path"] == "macro" else f"replayed op by op: {g['reason']}"
            at = f" at {g['location']}" if g["location"] else ""
            out.append(f"torch.compile captured {g['kind']} graph {g['name']}: {g['ops']} ops, {g['inputs']} inputs"
                       f"{at}; {how}")
        for b in self.breaks:
            out.append(f"torch.compile graph break at {b['location'] or 'an unknown line'}: {b['reason']}")
        for c in self.recaptures:
            at = f" ({c['location']})" if c["location"] else ""
            out.append(f"torch.compile captured again{at}: guard failed: {c['reason']}")
        return out

    def to_json(self) -> dict:
        return {"graphs": [dict(g) for g in self.graphs], "breaks": [dict(b) for b in self.breaks],
                "recaptures": [dict(c) for c in self.recaptures], "lines": self.lines()}


@dataclasses.dataclass(frozen=True)
class ReplayedFunction:
    """One `xlanb.compile(fn, replay=True)` function in the cell: its replayed calls, and why
    other calls were traced instead (a guard failed) or can never be replayed (schema 1.5)."""
    name: str
    calls: int                   # calls replayed
    host_ms: float               # their host time, all together (guards, launch, rebinding)
    keys: tuple[str, ...]        # the executables launched, in first-use order
    donated: int                 # input buffers donated per call (the last replayed call)
    misses: tuple[tuple[str, int], ...] = ()           # (reason, count): traced instead
    not_replayable: tuple[tuple[str, int], ...] = ()   # (reason, count)

    @property
    def per_call_us(self) -> float:
        return round(self.host_ms * 1000 / self.calls, 1) if self.calls else 0.0

    def lines(self) -> list[str]:
        out = []
        if self.calls:
            keys = ", ".join(k[:8] for k in self.keys)
            out.append(f"replay: {self.name} replayed {plural(self.calls, 'call')}, "
                       f"{format_call_ms(self.per_call_us / 1000)} host per call, executable {keys}")
        for reason, n in self.misses:
            out.append(f"replay: {self.name} traced instead: {reason}" + (f" (x{n})" if n > 1 else ""))
        for reason, n in self.not_replayable:
            out.append(f"replay: {self.name} not replayable: {reason}" + (f" (x{n})" if n > 1 else ""))
        return out

    def to_json(self) -> dict:
        return {"name": self.name, "calls": self.calls, "host_ms": self.host_ms, "per_call_us": self.per_call_us,
                "keys": list(self.keys), "donated": self.donated,
                "misses": [{"reason": r, "count": n} for r, n in self.misses],
                "not_replayable": [{"reason": r, "count": n} for r, n in self.not_replayable],
                "lines": self.lines()}


@dataclasses.dataclass(frozen=True)
class ReplaySection:
    """Step replay in the cell, one entry per function name, in first-event order (schema 1.5)."""
    functions: tuple[ReplayedFunction, ...] = ()

    @property
    def missed(self) -> bool:
        """A call traced instead (a guard failed), or a function cannot be replayed."""
        return any(f.misses or f.not_replayable for f in self.functions)

    def lines(self) -> list[str]:
        return [line for f in self.functions for line in f.lines()]

    def to_json(self) -> dict:
        return {"functions": [f.to_json() for f in self.functions], "lines": self.lines()}


def tolerance_text(rtol: float | None, atol: float | None, widened: str = "") -> str:
    """`rtol/atol: torch defaults`, `rtol 0.001, atol torch default`, `rtol 0.01, atol 1e-05`; with the
    platform's widening of the defaults: `rtol/atol: torch defaults, float32 and complex64 rtol 0.0001, atol 1e-05 on TPU`."""
    if rtol is None and atol is None:
        return "rtol/atol: torch defaults" + (f", {widened}" if widened else "")

    def one(v: float | None) -> str:
        return "torch default" if v is None else f"{v:g}"
    return f"rtol {one(rtol)}, atol {one(atol)}" + (f" ({widened})" if widened else "")


def _finite(x: float) -> float | str:
    """JSON has no inf or NaN: they travel as the strings "inf" and "nan"."""
    return x if x == x and abs(x) != float("inf") else str(x)


def compare_row_json(row) -> dict:
    return {"index": row.index, "op": row.op, "location": row.location, "module": row.module, "phase": row.phase,
            "status": row.status, "max_abs": _finite(row.max_abs), "max_rel": _finite(row.max_rel),
            "shape": list(row.shape), "dtype": row.dtype}


COMPARE_COLUMNS = ("#", "op", "location", "module", "phase", "status", "max abs", "max rel")


def compare_table_lines(rows) -> list[str]:
    """The window of rows as a text table, columns as wide as their longest entry."""
    cells = [COMPARE_COLUMNS] + [(str(r.index), r.op, r.location, r.module, r.phase, r.status,
                                  format_error(r.max_abs), format_error(r.max_rel)) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COMPARE_COLUMNS))]
    right = (0, 6, 7)              # numbers
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
            for row in cells]


@dataclasses.dataclass(frozen=True)
class CompareRegion:
    """One `xlanb.compare()` region: its ops against their CPU twins (schema 1.6). `rows` is a
    window around the first divergence (events.CompareRow, locations named for the reader), empty
    when every op agreed; the region's other rows stay out of the report (`hidden` counts them)."""
    ops: int                     # ops compared
    skipped: int                 # ops not compared (random, uninitialized, not runnable on the CPU)
    rtol: float | None           # None: torch.testing.assert_close's tolerance for each dtype
    atol: float | None
    precision: str               # torch's float32 matmul precision in the region
    hint: str                    # a likely cause of the first divergence, or ""
    differ: int                  # ops whose outputs differ ("introduced" or "inherited")
    first: Any = None            # the first divergence (an events.CompareRow), or None
    rows: tuple = ()
    hidden: int = 0              # rows not in `rows`
    widened: str = ""            # the platform's widening of torch's default tolerances, in words

    @property
    def ok(self) -> bool:
        return not self.differ and self.first is None

    def headline(self) -> str:
        """`compare: first divergence at aten.gelu.default, cell line 3 (module 'mlp.act'), forward: ...`."""
        f, tolerance = self.first, tolerance_text(self.rtol, self.atol, self.widened)
        if f is None:
            skipped = f", {plural(self.skipped, 'op')} not compared" if self.skipped else ""
            if self.differ:
                return (f"compare: {plural(self.differ, 'op')} of {self.ops} differ ({tolerance}){skipped}, but none "
                        "computes other values than the CPU's from the inputs it got: differences under the "
                        "tolerance grew past it (a product scales an absolute error)")
            return f"compare: {plural(self.ops, 'op')} within tolerance ({tolerance}){skipped}"
        at = f", {f.location}" if f.location else ""
        module = f" (module '{f.module}')" if f.module else ""
        return (f"compare: first divergence at {f.op}{at}{module}, {f.phase}: max abs {format_error(f.max_abs)}, "
                f"max rel {format_error(f.max_rel)}")

    def detail(self) -> str:
        """`214 ops compared (rtol/atol: torch defaults), 41 differ, 3 not compared; ops 9 to 20 shown`."""
        skipped = f", {self.skipped} not compared" if self.skipped else ""
        shown = f"; ops {self.rows[0].index} to {self.rows[-1].index} shown" if self.rows and self.hidden else ""
        return (f"{plural(self.ops, 'op')} compared ({tolerance_text(self.rtol, self.atol, self.widened)}), {self.differ} differ"
                f"{skipped}{shown}")

    def lines(self) -> list[str]:
        if self.first is None:
            return [self.headline()]
        out = [self.headline(), "  " + self.detail()] + ["  " + line for line in compare_table_lines(self.rows)]
        return out + ([f"  hint: {self.hint}"] if self.hint else [])

    def to_json(self) -> dict:
        rtol, atol = (None if v is None else _finite(v) for v in (self.rtol, self.atol))
        return {"ok": self.ok, "ops": self.ops, "skipped": self.skipped, "rtol": rtol, "atol": atol,
                "precision": self.precision, "hint": self.hint, "differ": self.differ,
                "first": compare_row_json(self.first) if self.first is not None else None,
                "rows": [compare_row_json(r) for r in self.rows], "hidden": self.hidden,
                "text": self.headline(), "detail": self.detail(), "lines": self.lines()}


@dataclasses.dataclass(frozen=True)
class CompareSection:
    """`xlanb.compare()` in the cell, one entry per region, in order (schema 1.6)."""
    regions: tuple[CompareRegion, ...] = ()

    @property
    def diverged(self) -> bool:
        """An op's outputs differed from its CPU twin's: the report opens by itself."""
        return any(not r.ok for r in self.regions)

    def lines(self) -> list[str]:
        return [line for r in self.regions for line in r.lines()]

    def to_json(self) -> dict:
        return {"regions": [r.to_json() for r in self.regions], "lines": self.lines()}


@dataclasses.dataclass(frozen=True)
class CellReport:
    execution_count: int | None
    cell_id: str | None
    mode: str                    # "eager" | "lazy" | "compiled" (an %%xla_compile cell)
    style: str                   # "on" | "compact" | "full"
    wall_ms: float
    summary: Summary
    graphs: tuple[GraphSection, ...] = ()
    cached: tuple[CachedRun, ...] = ()
    eager: EagerSummary = EagerSummary()
    forced: tuple[Forced, ...] = ()
    fallbacks: tuple[FallbackNote, ...] = ()
    recompiles: tuple[Recompile, ...] = ()
    pending: PendingIR | None = None
    errors: tuple[str, ...] = ()
    timeline: Timeline = Timeline()
    state: dict | None = None    # the runtime at the end of the cell (schema 1.1)
    devices: Any = None          # report.sharding.DevicesSection: shardings, collectives, loader (schema 1.3)
    torch_compile: TorchCompile | None = None   # torch.compile(backend="xlanb") in the cell (schema 1.2)
    memory: Any = None           # report.memory.MemoryReport: device memory by variable (1.3)
    replay: ReplaySection | None = None   # xlanb.compile(fn, replay=True) in the cell (schema 1.5)
    compare: CompareSection | None = None   # xlanb.compare() regions in the cell (schema 1.6)

    @property
    def empty(self) -> bool:
        """Nothing to say: the cell did not touch the runtime."""
        s = self.summary
        return not (s.graphs_compiled or s.graphs_executed or s.eager_ops_compiled or s.eager_ops_executed
                    or s.to_device.count or s.from_device.count or s.syncs or self.forced or self.fallbacks
                    or self.pending or self.errors or self.torch_compile or self.replay or self.compare)

    def to_json(self) -> dict[str, Any]:
        """The data, without its text renderings (report.serialize.render_json adds them)."""
        return {
            "version": REPORT_SCHEMA_VERSION,
            "cell": {"execution_count": self.execution_count, "cell_id": self.cell_id, "mode": self.mode,
                     "style": self.style, "wall_ms": self.wall_ms},
            "summary": self.summary.to_json(),
            "graphs": [g.to_json() for g in self.graphs],
            "cached": [c.to_json() for c in self.cached],
            "eager": self.eager.to_json(),
            "forced": [f.to_json() for f in self.forced],
            "fallbacks": [f.to_json() for f in self.fallbacks],
            "recompiles": [r.to_json() for r in self.recompiles],
            "pending": self.pending.to_json() if self.pending else None,
            "errors": list(self.errors),
            "timeline": self.timeline.to_json(),
            "state": self.state,
            "devices": self.devices.to_json() if self.devices is not None else None,
            "torch_compile": self.torch_compile.to_json() if self.torch_compile else None,
            "memory": self.memory.to_json() if self.memory else None,
            "replay": self.replay.to_json() if self.replay else None,
            "compare": self.compare.to_json() if self.compare else None,
        }
