"""The report as plain text: the `text/plain` representation, and what tests read."""

from __future__ import annotations

from xlanb.report.format import at_where, format_bytes, format_ms, plural, tensors_text
from xlanb.report.insight import failure_line, fusion_lines, memory_lines, modules_line

TEXT_IR_LINES = 40      # IR lines per graph in the text form ("full" shows all it has)


def summary_line(r) -> str:
    """One line: graphs, cache, times, transfers."""
    s = r.summary
    parts = []
    if s.graphs_compiled or s.graphs_executed:
        replayed = f" ({s.replayed} replayed)" if s.replayed else ""
        parts.append(f"{plural(s.graphs_compiled, 'graph')} compiled, {s.graphs_executed} executed{replayed}")
    if s.eager_ops_compiled or s.eager_ops_executed:
        parts.append(f"{plural(s.eager_ops_compiled, 'eager op')} compiled, {s.eager_ops_executed} run")
    if s.cache_hits or s.cache_misses:
        parts.append(f"cache: {plural(s.cache_hits, 'hit')}, {plural(s.cache_misses, 'miss')}")
    if s.cache_misses:
        parts.append(f"compile {format_ms(s.lower_ms + s.compile_ms)}")
    if s.graphs_executed or s.eager_ops_executed:
        parts.append(f"execute {format_ms(s.execute_ms)}")
    for label, t in (("to device", s.to_device), ("from device", s.from_device)):
        if t.count:
            parts.append(f"{label}: {plural(t.count, 'transfer')} ({format_bytes(t.bytes)})")
    if s.syncs:
        parts.append(plural(s.syncs, "sync"))
    if s.forced:
        parts.append(plural(s.forced, "forced execution"))
    if s.fallbacks:
        parts.append(plural(s.fallbacks, "CPU fallback"))
    violations = sum(1 for f in r.forced if f.kind == "violation")
    if violations:
        parts.append(plural(violations, "full_graph violation"))
    if r.pending is not None:
        parts.append(f"{plural(r.pending.nodes, 'op')} pending")
    if not parts:
        parts.append("nothing ran")
    head = f"xlanb [{r.mode}]"
    return head + ": " + " \u00b7 ".join(parts)


def graph_line(g) -> str:
    cache = " (disk cache)" if g.persistent_hit else ""
    runs = f", ran {g.executions}x ({format_ms(g.execute_ms)})" if g.executions else ", not run yet"
    return (f"graph {g.name} [{g.key[:8]}] {plural(g.nodes, 'op')}, in: {tensors_text(g.inputs)}, "
            f"out: {tensors_text(g.outputs)}; lower {format_ms(g.lower_ms)}, compile {format_ms(g.compile_ms)}"
            f"{cache}{precision_note(g)}{runs}; {g.cause}{at_where(g.where)}")


def precision_note(g) -> str:
    """`, matmul precision: medium` when torch's float32 matmul precision was not its default, and
    `, compile effort: fast` when XLA was asked to optimize less."""
    note = "" if g.matmul_precision == "highest" else f", matmul precision: {g.matmul_precision}"
    return note + ("" if g.compile_effort == "default" else f", compile effort: {g.compile_effort}")


def _indent(text: str, prefix: str) -> list[str]:
    return [prefix + line for line in text.splitlines()]


def _ir_lines(ir, full: bool) -> list[str]:
    lines = ir.text.splitlines()
    if not full and len(lines) > TEXT_IR_LINES + 2:
        cut = len(lines) - TEXT_IR_LINES - 2
        lines = lines[:TEXT_IR_LINES + 1] + [f"  ... {cut} more lines", "}"]
    return lines


def forced_line(f) -> str:
    source = f": {f.where.source}" if f.where and f.where.source else ""
    times = f" (x{f.count})" if f.count > 1 else ""
    label = "full_graph violation" if f.kind == "violation" else "forced execution"
    return f"{label}: {f.cause} in graph {f.graph}{at_where(f.where)}{source}{times}"


def fallback_line(f) -> str:
    graphs = f" in graph {', '.join(f.graphs)}" if f.graphs else ""
    times = f", ran {f.count}x" if f.count > 1 else ""
    return f"CPU fallback: {f.op} ({f.reason}){graphs}{at_where(f.where)}{times}"


def pending_line(p) -> str:
    held = ", ".join(f"{t.name} ({t.type})" for t in p.tensors[:8])
    if len(p.tensors) > 8:
        held += f", ... ({len(p.tensors)} named)"
    unnamed = f"{'; ' if held else ''}{p.unnamed} unnamed" if p.unnamed else ""
    return (f"pending IR left behind: {plural(p.nodes, 'node')}, held by {held}{unnamed} "
            "(xlanb.sync() or a value access computes it)")


def eager_line(e) -> str:
    ops = "; ".join(f"{o.op} {o.signature}" + (f" x{o.compiles}" if o.compiles > 1 else "") for o in e.ops[:12])
    more = f"; ... ({len(e.ops)} in all)" if len(e.ops) > 12 else ""
    return (f"eager ops: {e.compiles} compiled ({format_ms(e.compile_ms)}), {e.executions} run "
            f"({format_ms(e.execute_ms)})" + (f": {ops}{more}" if ops else ""))


def replay_summary(rp) -> str:
    """`replay: 8 calls replayed, 1 call traced instead, 1 function not replayable` (a section title)."""
    parts = [f"{plural(sum(f.calls for f in rp.functions), 'call')} replayed"]
    failed = sum(n for f in rp.functions for _, n in f.misses)
    if failed:
        parts.append(f"{plural(failed, 'call')} traced instead")
    never = sum(1 for f in rp.functions if f.not_replayable)
    if never:
        parts.append(f"{plural(never, 'function')} not replayable")
    return "replay: " + ", ".join(parts)


def marked_ir_text(ir, highlight) -> str:
    """The IR text with the lines of a failing cell line marked `>>`."""
    if not highlight:
        return ir.text
    marks = {f"%{i} =" for i in highlight}
    return "\n".join(">>" + line[2:] if line.startswith("  %") and line[2:].split(" ", 2)[0] + " =" in marks
                     else line for line in ir.text.splitlines())


def render_text(r) -> str:
    """The whole report as text; `full` style adds the IR of every graph and its HLO."""
    full = r.style == "full"
    out = [summary_line(r)]
    for g in r.graphs:
        out.append("  " + graph_line(g))
        if g.recompile is not None:
            out.append(f"    recompiled: {g.recompile.text}")
        if g.fallback_ops:
            out.append(f"    CPU fallback ops: {', '.join(g.fallback_ops)}")
        if g.modules is not None:
            out.append("    " + modules_line(g.modules))
        out += ["    " + line for line in fusion_lines(g.fusions, full)]
        if r.style != "compact":
            out += _indent("\n".join(_ir_lines(g.ir, full)), "    ")
        if full:
            for title, stage in (("StableHLO", g.stablehlo), ("optimized HLO", g.optimized)):
                if stage is not None:
                    out.append(f"    {title}:")
                    out += _indent(stage.text, "      ")
    if r.torch_compile is not None:
        out += ["  " + line for line in r.torch_compile.lines()]
    if r.devices is not None:
        out += r.devices.text_lines(pictures=r.style != "compact")
    for c in r.cached:
        out.append(f"  graph {c.name} [{c.key[:8]}] from cache, ran {c.executions}x ({format_ms(c.execute_ms)})")
    if r.replay is not None:
        out += ["  " + line for line in r.replay.lines()]
    if r.compare is not None:
        out += ["  " + line for line in r.compare.lines()]
    if r.eager.compiles or r.eager.executions:
        out.append("  " + eager_line(r.eager))
    for f in r.forced:
        out.append("  " + forced_line(f))
    for f in r.fallbacks:
        out.append("  " + fallback_line(f))
    for e in r.errors:
        out.append(f"  error: {e}")
    if r.pending is not None:
        p = r.pending
        out.append("  " + pending_line(p))
        if p.failure is not None:
            out.append("  " + failure_line(p.failure))
        if p.modules is not None:
            out.append("    " + modules_line(p.modules))
        if r.style != "compact":
            marked = marked_ir_text(p.ir, p.failure.highlight if p.failure else ())
            out += _indent("\n".join(_ir_lines(_Text(marked), full)), "    ")
    if r.memory is not None:
        out += ["  " + line for line in memory_lines(r.memory)]
    return "\n".join(out)


class _Text:
    """An IR text already made (marked lines), for _ir_lines."""
    def __init__(self, text: str):
        self.text = text
