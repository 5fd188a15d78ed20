"""events -> CellReport: a pure function of the events a cell produced (and a little context)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from xlanb import events as ev
from xlanb.report.dag import draw_dag
from xlanb.report.fusions import fusions
from xlanb.report.modules import module_view
from xlanb.report.model import (CachedRun, CellReport, CompareRegion, CompareSection, EagerOp, EagerSummary,
                                FallbackNote, Forced, GraphSection, IrText, PendingIR, PendingTensor, Recompile,
                                ReplayedFunction, ReplaySection, Span, StageText, Summary, Tensor, Timeline,
                                TorchCompile, Transfers, _ms)
from xlanb.report.sharding import devices_section
from xlanb.report.timeline import timeline_svg
from xlanb.report.where import Cells, Where, location_text, rewrite_locations, user_where

STYLES = ("on", "compact", "full")
IR_LINES = 400          # IR lines kept per graph ("on" and "compact"; "full" keeps all)
HLO_LINES = 1500        # HLO lines kept per stage ("on"; "full" keeps all)
MAX_SPANS = 300         # timeline spans kept (the longest)
MAX_FORCED = 50         # distinct forced executions listed
DETAILED_GRAPHS = 20    # graphs per cell with HLO, DAG and analyses (100 in "full"); the rest get a summary
COMPARE_BEFORE, COMPARE_AFTER = 3, 8    # rows shown around a compare region's first divergence


@dataclasses.dataclass(frozen=True)
class CellContext:
    """What the notebook knows about the cell besides its events."""
    execution_count: int | None = None
    cell_id: str | None = None
    mode: str = "lazy"                  # "eager" | "lazy" | "compiled"
    style: str = "on"                   # "on" | "compact" | "full"
    cells: Cells = Cells()
    started: float | None = None        # time.time() when the cell started
    finished: float | None = None
    # frames the notebook recorded for events that carry none (CPU fallbacks), by event seq
    extra_frames: Mapping[int, tuple] = dataclasses.field(default_factory=dict)
    # the runtime when the cell ended: {"mode", "pending_nodes", "cache_size"} (status bars read it)
    state: Mapping[str, Any] | None = None


def _tensors(infos) -> tuple[Tensor, ...]:
    return tuple(Tensor(tuple(i.shape), i.dtype) for i in infos)


def _signature(c: ev.Compile) -> str:
    ins = ", ".join(Tensor(tuple(i.shape), i.dtype).text for i in c.inputs)
    outs = ", ".join(Tensor(tuple(o.shape), o.dtype).text for o in c.outputs)
    return f"{ins or '()'} -> {outs}"


_DEBUG_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def strip_debug_tables(text: str) -> str:
    """Drops the stack-frame tables XLA puts before the optimized HLO (metadata only points into them)."""
    out, skipping = [], False
    for line in text.splitlines():
        if line.strip() in _DEBUG_TABLES:
            skipping = True
        elif skipping and not line.strip():
            skipping = False
        elif not skipping:
            out.append(line)
    return "\n".join(out)


def _stage(text: str, stage: str, limit: int | None) -> StageText | None:
    if not text:         # not recorded (the runtime keeps texts only while asked: recording_texts)
        return None
    if stage == "optimized" and limit is not None:
        text = strip_debug_tables(text)
    lines = text.splitlines()
    if limit is not None and len(lines) > limit:
        kept = "\n".join(lines[:limit]) + f"\n... {len(lines) - limit} more lines (%xla_report full shows all)"
        return StageText(kept, len(lines), True)
    return StageText(text, len(lines), False)




def relocate(lines, cells: Cells) -> tuple:
    """IR lines with their locations named by cell (`cell line 3`) where they are in a cell."""
    if not cells.files:
        return tuple(lines)
    return tuple(dataclasses.replace(line, location=location_text(line.location, cells)) if line.location else line
                 for line in lines)


def _ir_text(lines, limit: int | None) -> IrText:
    if limit is not None and len(lines) > limit:
        return IrText(tuple(lines[:limit]), len(lines), True)
    return IrText(tuple(lines), len(lines))


def pending_section(snapshot: ev.PendingSnapshot, *, cells: Cells = Cells(), limit: int | None = IR_LINES,
                    dag: bool = True, failure=None) -> PendingIR:
    """The report's view of a PendingSnapshot event: its IR (cut at `limit` lines), the DAG, and
    the notebook variables that hold its roots."""
    lines = relocate(snapshot.ir, cells)
    held = {t.root for t in snapshot.tensors}
    nodes = sum(1 for line in lines if not line.is_input)
    cut = limit is not None and len(lines) > limit
    ir = IrText(tuple(lines[:limit] if cut else lines), len(lines), cut,
                tuple((t.root, t.name) for t in snapshot.tensors))
    return PendingIR(nodes, tuple(PendingTensor(t.name, t.type) for t in snapshot.tensors), snapshot.roots - len(held),
                     ir, draw_dag(lines) if dag else None, module_view(lines, dags=dag), failure)


def _input_location(c: ev.Compile, i: int, cells: Cells) -> str:
    """Where input i is first used: the location of the first op reading it, when recorded."""
    inputs = [line.index for line in c.ir if line.is_input]
    if i >= len(inputs):
        return ""
    for line in c.ir:
        if inputs[i] in line.operands and line.location:
            return location_text(line.location, cells)
    return ""


def _recompile(c: ev.Compile, cells: Cells, where) -> Recompile | None:
    explanation = c.recompile          # events.Recompile
    if explanation is None:
        return None
    changes = []
    for ch in explanation.changes:
        loc = location_text(ch.location, cells)
        text = str(dataclasses.replace(ch, location=loc))
        if ch.kind == "input":
            loc = _input_location(c, ch.index, cells) or (where.text if where else "")
            text += f" ({loc})" if loc else ""
        changes.append({"kind": ch.kind, "index": ch.index, "before": ch.before, "after": ch.after,
                        "location": loc, "text": text})
    return Recompile(c.name, c.key, explanation.against, tuple(changes))


def _section(c: ev.Compile, runs, ctx: CellContext, detailed: bool) -> GraphSection:
    where = user_where(c.frames, ctx.cells)
    count, ns = runs.get(c.key, (0, 0))
    limit_hlo = None if ctx.style == "full" else HLO_LINES
    limit_ir = None if ctx.style == "full" else IR_LINES
    lines = relocate(c.ir, ctx.cells)
    return GraphSection(
        name=c.name, key=c.key, eager=c.eager, cause=c.cause, where=where, nodes=c.nodes,
        inputs=_tensors(c.inputs), outputs=_tensors(c.outputs), scalars=c.scalars,
        lower_ms=_ms(c.lower_ns), compile_ms=_ms(c.compile_ns), persistent_hit=c.persistent_hit,
        executions=count, execute_ms=_ms(ns), fallback_ops=tuple(ev.counter_name(o) for o in c.fallback_ops),
        recompile=_recompile(c, ctx.cells, where), ir=_ir_text(lines, limit_ir),
        dag=draw_dag(lines) if detailed else None,
        stablehlo=_stage(c.stablehlo, "stablehlo", limit_hlo) if detailed else None,
        optimized=_stage(c.optimized, "optimized", limit_hlo) if detailed else None,
        cost=dict(c.cost) if detailed and c.cost else None,
        memory=dict(c.memory) if detailed and c.memory else None,
        modules=module_view(lines, dags=detailed),
        fusions=fusions(c.optimized, lines, c.fusion_costs) if detailed else (),
        matmul_precision=c.matmul_precision, compile_effort=c.compile_effort,
    )


def _spans(evs, t0: float) -> tuple[tuple[Span, ...], int]:
    spans = []
    for e in evs:
        if isinstance(e, ev.Compile):
            end = (e.wall - t0) * 1e3
            spans.append(Span("compile", e.name, end - e.compile_ns / 1e6, _ms(e.compile_ns)))
            spans.append(Span("lower", e.name, end - (e.compile_ns + e.lower_ns) / 1e6, _ms(e.lower_ns)))
        elif isinstance(e, ev.Execute):
            spans.append(Span("execute", e.name, (e.wall - t0) * 1e3 - e.ns / 1e6, _ms(e.ns)))
        elif isinstance(e, ev.Replay):      # in the execute lane: the whole replayed call
            spans.append(Span("execute", f"{e.name} (replayed)", (e.wall - t0) * 1e3 - e.ns / 1e6, _ms(e.ns)))
        elif isinstance(e, ev.Transfer):
            spans.append(Span("transfer", e.direction, (e.wall - t0) * 1e3 - e.ns / 1e6, _ms(e.ns)))
    omitted = 0
    if len(spans) > MAX_SPANS:
        omitted = len(spans) - MAX_SPANS
        spans = sorted(spans, key=lambda s: -s.ms)[:MAX_SPANS]
    spans = [dataclasses.replace(s, start_ms=round(max(s.start_ms, 0.0), 3)) for s in spans]
    return tuple(sorted(spans, key=lambda s: s.start_ms)), omitted


def build_report(evs, ctx: CellContext = CellContext(), pending=None, *, failure=None, memory=None) -> CellReport:
    """The report of one cell from the events it emitted (`runtime_state().log.since(mark)`).

    The pending IR left behind is the last PendingSnapshot event among them, unless `pending`
    (a report.model.PendingIR) is given. `failure` (a report.model.Failure) marks that pending IR
    as the partial graph of a cell that raised; `memory` is the cell's report.memory.MemoryReport."""
    if ctx.style not in STYLES:
        raise ValueError(f"report style must be one of {STYLES}, got {ctx.style!r}")
    evs = list(evs)
    if pending is None:
        snapshot = next((e for e in reversed(evs) if isinstance(e, ev.PendingSnapshot)), None)
        if snapshot is not None:
            pending = pending_section(snapshot, cells=ctx.cells, dag=ctx.style != "compact", failure=failure)
    runs: dict[str, tuple[int, int]] = {}          # graph key -> (executions, ns)
    for e in evs:
        if isinstance(e, (ev.Execute, ev.Replay)):       # a replayed call launches a cached executable
            count, ns = runs.get(e.key, (0, 0))
            runs[e.key] = (count + 1, ns + e.ns)
    compiles = [e for e in evs if isinstance(e, ev.Compile)]
    sectioned = [c for c in compiles if not c.eager or ctx.style == "full"]
    detailed = 0 if ctx.style == "compact" else DETAILED_GRAPHS * (5 if ctx.style == "full" else 1)
    graphs = tuple(_section(c, runs, ctx, detailed=i < detailed) for i, c in enumerate(sectioned))
    forced, fallbacks, errors = _forced_and_fallbacks(evs, ctx)
    t0 = ctx.started if ctx.started is not None else min((e.wall for e in evs), default=0.0)
    spans, omitted = _spans(evs, t0)
    wall_ms = _ms((ctx.finished - ctx.started) * 1e9) if ctx.started and ctx.finished else 0.0
    end_ms = max([wall_ms] + [s.start_ms + s.ms for s in spans])
    return CellReport(
        execution_count=ctx.execution_count, cell_id=ctx.cell_id, mode=ctx.mode, style=ctx.style,
        wall_ms=wall_ms, summary=_summary(evs, forced, fallbacks), graphs=graphs,
        cached=_cached_runs(evs, {c.key for c in compiles}), eager=_eager(evs, ctx.style == "full"),
        forced=forced, fallbacks=fallbacks, recompiles=tuple(g.recompile for g in graphs if g.recompile),
        pending=pending, errors=errors,
        timeline=Timeline(spans, omitted, timeline_svg(spans, end_ms) if spans else ""),
        state=dict(ctx.state) if ctx.state is not None else None, torch_compile=_torch_compile(evs, ctx.cells),
        memory=memory, devices=devices_section(evs), replay=_replay(evs, ctx.cells),
        compare=_compare(evs, ctx.cells))


def _torch_compile(evs, cells: Cells) -> TorchCompile | None:
    graphs, breaks, recaptures = [], [], []
    for e in evs:
        if isinstance(e, ev.DynamoGraph):
            graphs.append({"name": e.name, "kind": e.kind, "path": e.path, "ops": e.ops, "inputs": e.inputs,
                           "reason": e.reason, "location": location_text(e.location, cells) if e.location else ""})
        elif isinstance(e, ev.DynamoBreak):
            entry = {"reason": e.reason, "location": location_text(e.location, cells) if e.location else ""}
            (breaks if e.kind == "graph_break" else recaptures).append(entry)
    if not (graphs or breaks or recaptures):
        return None
    return TorchCompile(tuple(graphs), tuple(breaks), tuple(recaptures))


def _replay(evs, cells: Cells) -> ReplaySection | None:
    """Per function name: its replayed calls, and the guard failures and not-replayable reasons
    (each text once, with how often it came; a cell's `file:line` in it named `cell line L`)."""
    found: dict[str, dict] = {}
    for e in evs:
        if isinstance(e, (ev.Replay, ev.ReplayMiss, ev.NotReplayable)):
            f = found.setdefault(e.name, {"calls": 0, "ns": 0, "keys": [], "donated": 0, "misses": {},
                                          "not_replayable": {}})
            if isinstance(e, ev.Replay):
                f["calls"] += 1
                f["ns"] += e.ns
                f["donated"] = e.donated
                if e.key not in f["keys"]:
                    f["keys"].append(e.key)
            else:
                reasons = f["misses"] if isinstance(e, ev.ReplayMiss) else f["not_replayable"]
                reason = rewrite_locations(e.reason, cells)
                reasons[reason] = reasons.get(reason, 0) + 1
    if not found:
        return None
    return ReplaySection(tuple(
        ReplayedFunction(name, f["calls"], _ms(f["ns"]), tuple(f["keys"]), f["donated"],
                         tuple(f["misses"].items()), tuple(f["not_replayable"].items()))
        for name, f in found.items()))


def _compare(evs, cells: Cells) -> CompareSection | None:
    """One entry per `xlanb.compare()` region (a Compared event), in order."""
    regions = tuple(_compare_region(e, cells) for e in evs if isinstance(e, ev.Compared))
    return CompareSection(regions) if regions else None


def _compare_region(e: ev.Compared, cells: Cells) -> CompareRegion:
    """The first divergence and the rows around it, COMPARE_BEFORE before and up to COMPARE_AFTER
    after (how its error grows); the region's other rows, thousands in a training step, stay out."""
    def named(row: ev.CompareRow) -> ev.CompareRow:
        return dataclasses.replace(row, location=location_text(row.location, cells))
    first, window = None, ()
    if e.first is not None:
        first = named(e.rows[e.first])
        window = tuple(named(r) for r in e.rows[max(0, e.first - COMPARE_BEFORE):e.first + COMPARE_AFTER + 1])
    return CompareRegion(ops=len(e.rows), skipped=e.skipped, rtol=e.rtol, atol=e.atol, precision=e.precision,
                         hint=e.hint, differ=sum(r.status != "ok" for r in e.rows), first=first, rows=window,
                         hidden=len(e.rows) - len(window), widened=e.widened)


def _transfers(evs, direction: str) -> Transfers:
    ts = [e for e in evs if isinstance(e, ev.Transfer) and e.direction == direction]
    return Transfers(len(ts), sum(e.nbytes for e in ts), _ms(sum(e.ns for e in ts)))


def _summary(evs, forced, fallbacks) -> Summary:
    compiles = [e for e in evs if isinstance(e, ev.Compile)]
    executes = [e for e in evs if isinstance(e, ev.Execute)]
    replays = [e for e in evs if isinstance(e, ev.Replay)]
    eager_compiles = sum(c.eager for c in compiles)
    eager_runs = sum(e.eager for e in executes)
    # a replayed call launches an executable already in memory: an execution and a cache hit
    # (emitting no Execute event); its time is the whole call's host time
    return Summary(
        graphs_compiled=len(compiles) - eager_compiles,
        graphs_executed=len(executes) - eager_runs + len(replays),
        eager_ops_compiled=eager_compiles, eager_ops_executed=eager_runs,
        cache_hits=sum(e.cached for e in executes) + len(replays), cache_misses=len(compiles),
        persistent_hits=sum(c.persistent_hit for c in compiles),
        lower_ms=_ms(sum(c.lower_ns for c in compiles)), compile_ms=_ms(sum(c.compile_ns for c in compiles)),
        execute_ms=_ms(sum(e.ns for e in executes) + sum(e.ns for e in replays)),
        syncs=sum(1 for e in evs if isinstance(e, ev.Sync) and e.kind == "mark_step" and e.roots),
        replayed=len(replays),
        forced=sum(f.count for f in forced if f.kind == "value"), fallbacks=len(fallbacks),
        to_device=_transfers(evs, "to_device"), from_device=_transfers(evs, "from_device"))


def _eager(evs, sectioned: bool) -> EagerSummary:
    """Eager op graphs in aggregate: which ops compiled (for which shapes), how many ran."""
    compiles = [e for e in evs if isinstance(e, ev.Compile) and e.eager]
    runs = [e for e in evs if isinstance(e, ev.Execute) and e.eager]
    ops: dict[tuple, tuple[int, int]] = {}
    for c in compiles if not sectioned else ():     # in "full" style they have sections instead
        key = (c.name, _signature(c))
        n, ns = ops.get(key, (0, 0))
        ops[key] = (n + 1, ns + c.lower_ns + c.compile_ns)
    return EagerSummary(
        ops=tuple(EagerOp(op, sig, n, _ms(ns)) for (op, sig), (n, ns) in ops.items()),
        compiles=len(compiles), executions=len(runs),
        compile_ms=_ms(sum(c.lower_ns + c.compile_ns for c in compiles)), execute_ms=_ms(sum(e.ns for e in runs)))


def _cached_runs(evs, compiled_keys: set) -> tuple[CachedRun, ...]:
    """Graphs compiled before this cell that it ran again."""
    cached: dict[str, list] = {}
    for e in evs:
        if (isinstance(e, ev.Replay) or isinstance(e, ev.Execute) and not e.eager) and e.key not in compiled_keys:
            entry = cached.setdefault(e.key, [e.name, 0, 0])
            entry[1] += 1
            entry[2] += e.ns
    return tuple(CachedRun(name, key, n, _ms(ns)) for key, (name, n, ns) in cached.items())


def _forced_and_fallbacks(evs, ctx: CellContext):
    cells = ctx.cells
    forced: dict[tuple, Forced] = {}
    notes: dict[str, dict] = {}
    errors: list[str] = []
    last_frames: tuple = ()       # frames of the latest sync or graph cut: where a fallback ran from
    cut_frames: tuple = ()
    for e in evs:
        if isinstance(e, ev.Sync):
            last_frames = e.frames or last_frames
            if e.kind in ("value", "violation"):
                where = user_where(e.frames, cells)
                key = (e.kind, e.cause, e.name, where.text if where else "")
                prev = forced.get(key)
                forced[key] = Forced(e.kind, e.cause, e.name, where, (prev.count if prev else 0) + 1)
                if e.kind == "violation":
                    at = f" at {where.text}" if where else ""
                    errors.append(f"Unexpected execution inside the compiled function '{e.name}': {e.cause}{at}")
        elif isinstance(e, ev.GraphCut):
            cut_frames = e.frames
        elif isinstance(e, ev.Fallback):
            if e.reason == "value access":     # .item(): a transfer, not an op without a lowering
                continue
            frames = ctx.extra_frames.get(e.seq) or (cut_frames if "data-dependent" in e.reason else ()) \
                or last_frames
            note = notes.setdefault(e.op, {"reason": e.reason, "graphs": [], "frames": frames, "count": 0})
            note["count"] += 1
            note["frames"] = note["frames"] or frames
        elif isinstance(e, ev.Compile):
            last_frames = e.frames or last_frames
            for op in e.fallback_ops:
                name = ev.counter_name(op)
                note = notes.setdefault(name, {"reason": "no lowering", "graphs": [], "frames": (), "count": 0})
                if e.name not in note["graphs"]:
                    note["graphs"].append(e.name)
                loc = next((line.location for line in e.ir
                            if line.location and ev.counter_name(line.op) == name), "")
                note.setdefault("location", loc)
                if not note["frames"]:
                    note["frames"] = e.frames
        elif isinstance(e, ev.DeferredError):
            errors.append(f"error inside backward (raised at the next sync): {e.message}")
    fallbacks = []
    for op, n in notes.items():
        where = user_where(n["frames"], cells)
        if n.get("location"):      # the op's own line (recorded inside compiled functions)
            where = Where(location_text(n["location"], cells))
        fallbacks.append(FallbackNote(op, n["reason"], tuple(n["graphs"]), where, n["count"]))
    ordered = list(forced.values())[:MAX_FORCED]
    return tuple(ordered), tuple(fallbacks), tuple(errors)
