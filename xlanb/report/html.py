"""The report as HTML: the `text/html` fallback (Colab, VS Code, GitHub, untrusted notebooks).

It must read well with its `<style>` stripped and no JavaScript: `<details>`, `<table>`,
`<pre>` and inline SVG only; the style block only adds color.
"""

from __future__ import annotations

import html

from xlanb.report.format import format_bytes, format_call_ms, format_error, format_ms, plural, tensors_text
from xlanb.report.hlo import highlight
from xlanb.report.insight import failure_html, fusions_html, link_fusions, memory_html, modules_html
from xlanb.report.model import COMPARE_COLUMNS
from xlanb.report.text import (eager_line, fallback_line, forced_line, marked_ir_text, pending_line, precision_note,
                               replay_summary, summary_line)

CSS = """
.xlanb-report{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;
  color:var(--jp-content-font-color1,#1f2328);line-height:1.45;max-width:100%}
.xlanb-report summary{cursor:pointer;padding:2px 0}
.xlanb-report details details{margin:4px 0 4px 14px}
.xlanb-report .x-top>summary{font-size:13px}
.xlanb-report .x-top>summary b{color:#3d6fb6}
.xlanb-report .x-notes{margin:4px 0 6px 0;padding-left:18px}
.xlanb-report .x-notes li{margin:1px 0}
.xlanb-report .x-tag{display:inline-block;min-width:7.5em;font-size:11px;font-weight:600;border-radius:3px;
  padding:0 5px;margin-right:4px;text-align:center;color:#fff}
.xlanb-report .x-recompile{background:#8250df}.xlanb-report .x-forced{background:#bc4c00}
.xlanb-report .x-fallback{background:#cf222e}.xlanb-report .x-error{background:#82071e}
.xlanb-report .x-pending{background:#6e7781}.xlanb-report .x-failure{color:#82071e}.xlanb-report .x-sep{display:none}
.xlanb-report table{border-collapse:collapse;margin:4px 0;font-size:12px}
.xlanb-report th,.xlanb-report td{border:1px solid var(--jp-border-color2,#d0d7de);padding:2px 6px;
  text-align:left;vertical-align:top}
.xlanb-report th{background:var(--jp-layout-color2,#f6f8fa);font-weight:600}
.xlanb-report td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.xlanb-report td.where{white-space:nowrap}
.xlanb-report code,.xlanb-report pre{font-family:var(--jp-code-font-family,ui-monospace,Menlo,Consolas,monospace);
  font-size:12px}
.xlanb-report pre{background:var(--jp-layout-color2,#f6f8fa);padding:6px 8px;margin:4px 0;max-height:420px;
  overflow:auto;white-space:pre;border-radius:4px}
.xlanb-report .x-scroll{max-height:480px;max-width:100%;overflow:auto;border:1px solid var(--jp-border-color2,#d0d7de);
  border-radius:4px;background:#fff;padding:4px}
.xlanb-report tr.x-first td{background:#ffebe9}
.xlanb-report .x-muted{color:var(--jp-content-font-color2,#57606a)}
.xlanb-report .h-comment,.xlanb-report .h-meta{color:#8c959f}.xlanb-report .h-string{color:#0a3069}
.xlanb-report .h-name{color:#953800}.xlanb-report .h-type{color:#116329}.xlanb-report .h-keyword{color:#cf222e;
  font-weight:600}.xlanb-report .h-op{color:#8250df}.xlanb-report .h-number{color:#0550ae}
"""


_TABLE = 'border="1" cellpadding="3" cellspacing="0"'      # borders even where <style> is stripped


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _details(summary: str, body: str, open_: bool = False, cls: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (" open" if open_ else "")
    return f"<details{attrs}><summary>{summary}</summary>{body}</details>"


def _code(text: str) -> str:
    return f'<pre class="x-code">{highlight(text)}</pre>'


def _note(kind: str, label: str, text: str) -> str:
    return f'<li><span class="x-tag x-{kind}">{label}</span><span class="x-sep">: </span>{_e(text)}</li>'


def _notes(r) -> str:
    items = []
    for g in r.graphs:
        if g.recompile is not None:
            items.append(_note("recompile", "recompiled", f"graph {g.name}: {g.recompile.text}"))
    for f in r.forced:
        items.append(_note("error" if f.kind == "violation" else "forced",
                           "violation" if f.kind == "violation" else "forced", forced_line(f).split(": ", 1)[1]))
    for f in r.fallbacks:
        items.append(_note("fallback", "CPU fallback", fallback_line(f).split(": ", 1)[1]))
    for e in r.errors:
        if not e.startswith("Unexpected execution"):      # violations are listed above
            items.append(_note("error", "error", e))
    if r.pending is not None:
        if r.pending.failure is not None:
            items.append(_note("error", "failed", r.pending.failure.text))
        items.append(_note("pending", "pending", pending_line(r.pending).split(": ", 1)[1]))
    for w in (r.memory.warnings if r.memory is not None else ()):
        items.append(_note("error", "memory", w))
    return f'<ul class="x-notes">{"".join(items)}</ul>' if items else ""


def _graph_table(r) -> str:
    if not r.graphs and not r.cached:
        return ""
    head = ("<tr><th>graph</th><th>key</th><th>ops</th><th>inputs</th><th>outputs</th><th>lower</th>"
            "<th>compile</th><th>runs</th><th>execute</th><th>where</th></tr>")
    rows = []
    for g in r.graphs:
        rows.append(
            f"<tr><td><b>{_e(g.name)}</b></td><td><code>{_e(g.key[:8])}</code></td><td class=num>{g.nodes}</td>"
            f"<td><code>{_e(tensors_text(g.inputs))}</code></td><td><code>{_e(tensors_text(g.outputs))}</code></td>"
            f"<td class=num>{format_ms(g.lower_ms)}</td><td class=num>{format_ms(g.compile_ms)}"
            f"{' (disk)' if g.persistent_hit else ''}</td><td class=num>{g.executions}</td>"
            f"<td class=num>{format_ms(g.execute_ms)}</td><td class=where>{_e(g.where.text) if g.where else ''}</td></tr>")
    for c in r.cached:
        rows.append(f"<tr><td><b>{_e(c.name)}</b></td><td><code>{_e(c.key[:8])}</code></td>"
                    f"<td colspan=5 class=x-muted>compiled earlier (cache hit)</td><td class=num>{c.executions}</td>"
                    f"<td class=num>{format_ms(c.execute_ms)}</td><td></td></tr>")
    return f"<table {_TABLE}>{head}{''.join(rows)}</table>"


def _kv_table(d: dict, fmt) -> str:
    rows = "".join(f"<tr><td>{_e(k)}</td><td class=num>{_e(fmt(k, v))}</td></tr>" for k, v in d.items())
    return f"<table {_TABLE}>{rows}</table>"


def _cost_value(key: str, v: float) -> str:
    if "bytes" in key:
        return format_bytes(int(v))
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:.4g}"


def _graph_details(g, r) -> str:
    parts = [f"<p>cause: {_e(g.cause)}" + (f" at <b>{_e(g.where.text)}</b>" if g.where else "")
             + (f" <code>{_e(g.where.source)}</code>" if g.where and g.where.source else "") + "<br>"
             f"inputs: <code>{_e(tensors_text(g.inputs))}</code>"
             + (f" + {plural(g.scalars, 'scalar')}" if g.scalars else "")
             + f"<br>outputs: <code>{_e(tensors_text(g.outputs))}</code></p>"]
    if g.recompile is not None:
        parts.append(f"<p><b>why it recompiled:</b> {_e(g.recompile.text)} "
                     f"<span class=x-muted>(against graph {_e(g.recompile.against[:8])})</span></p>")
    if g.fallback_ops:
        parts.append(f"<p><b>CPU fallback ops:</b> {_e(', '.join(g.fallback_ops))}</p>")
    cut = f", first {len(g.ir.lines)} shown" if g.ir.truncated else ""
    parts.append(_details(f"IR ({plural(g.ir.nodes, 'node')}{cut})", _code(g.ir.text), open_=r.style == "full"))
    if g.dag is not None:
        note = {"none": "", "groups": ", chains and single-use inputs grouped",
                "layers": ", collapsed to one box per layer"}[g.dag.collapsed]
        parts.append(_details(f"DAG ({plural(g.dag.drawn, 'box')}{note})", f'<div class="x-scroll">{g.dag.svg}</div>'))
    if g.modules is not None:
        parts.append(modules_html(g.modules, _details))
    if g.fusions:
        parts.append(fusions_html(g.fusions, g.key, _details))
    for title, stage in (("StableHLO", g.stablehlo), ("Optimized HLO", g.optimized)):
        if stage is not None:
            cut = ", truncated" if stage.truncated else ""
            code = _code(stage.text)
            if stage is g.optimized and g.fusions:
                code = link_fusions(code, g.fusions, g.key)
            parts.append(_details(f"{title} ({plural(stage.lines, 'line')}{cut})", code))
    if g.cost or g.memory:
        tables = ""
        if g.cost:
            tables += "<b>cost analysis</b>" + _kv_table(g.cost, _cost_value)
        if g.memory:
            tables += "<b>memory analysis</b>" + _kv_table(g.memory, lambda k, v: format_bytes(int(v)))
        parts.append(_details("Cost and memory", tables))
    summary = (f"graph <b>{_e(g.name)}</b> <code>[{_e(g.key[:8])}]</code> {plural(g.nodes, 'op')}, "
               f"compile {format_ms(g.lower_ms + g.compile_ms)}{_e(precision_note(g))}")
    return _details(summary, "".join(parts), cls="x-graph")


def _eager_table(e) -> str:
    rows = "".join(f"<tr><td><code>{_e(o.op)}</code></td><td><code>{_e(o.signature)}</code></td>"
                   f"<td class=num>{o.compiles}</td><td class=num>{format_ms(o.compile_ms)}</td></tr>" for o in e.ops)
    head = "<tr><th>op</th><th>signature</th><th>compiles</th><th>compile</th></tr>"
    return f"<table {_TABLE}>{head}{rows}</table>" if rows else ""


def _reasons_html(reasons, label: str) -> str:
    return "".join(f"<li>{label}: {_e(reason)}" + (f" (x{n})" if n > 1 else "") + "</li>" for reason, n in reasons)


def _replay_html(rp) -> str:
    """Step replay: a row per function (calls replayed, host time per call, the executable), then
    each guard failure and not-replayable reason once, with its count; open when there are any."""
    head = "<tr><th>function</th><th>replayed calls</th><th>host per call</th><th>executable</th></tr>"
    rows, items = [], []
    for f in rp.functions:
        per_call = format_call_ms(f.per_call_us / 1000) if f.calls else ""
        keys = ", ".join(f"<code>{_e(k[:8])}</code>" for k in f.keys)
        rows.append(f"<tr><td><b>{_e(f.name)}</b></td><td class=num>{f.calls}</td><td class=num>{per_call}</td>"
                    f"<td>{keys}</td></tr>")
        items.append(_reasons_html(f.misses, f"{_e(f.name)} traced instead")
                     + _reasons_html(f.not_replayable, f"{_e(f.name)} not replayable"))
    notes = f'<ul class="x-replay-notes">{"".join(items)}</ul>' if rp.missed else ""
    return _details(_e(replay_summary(rp)), f"<table {_TABLE} class=x-replay>{head}{''.join(rows)}</table>{notes}",
                    open_=rp.missed, cls="x-replay-section")


def _compare_html(cs) -> str:
    """Each xlanb.compare() region: one line when its ops agreed; else the first divergence, open,
    with the rows around it (how the error grows) and the hint."""
    head = "".join(f"<th>{_e(c)}</th>" for c in COMPARE_COLUMNS)
    out = []
    for c in cs.regions:
        if c.first is None:
            out.append(f'<p class="x-compare-ok">{_e(c.headline())}</p>')
            continue
        rows = "".join(
            f"<tr{' class=x-first' if r.index == c.first.index else ''}><td class=num>{r.index}</td>"
            f"<td><code>{_e(r.op)}</code></td><td class=where>{_e(r.location)}</td><td>{_e(r.module)}</td>"
            f"<td>{_e(r.phase)}</td><td>{_e(r.status)}</td><td class=num>{_e(format_error(r.max_abs))}</td>"
            f"<td class=num>{_e(format_error(r.max_rel))}</td></tr>" for r in c.rows)
        hint = f'<p class="x-compare-hint"><b>hint:</b> {_e(c.hint)}</p>' if c.hint else ""
        out.append(_details(_e(c.headline()), f"<p>{_e(c.detail())}</p><table {_TABLE} class=x-compare><tr>{head}</tr>"
                            f"{rows}</table>{hint}", open_=True, cls="x-compare-section"))
    return "".join(out)


def render_html(r) -> str:
    """The report as one self-contained HTML fragment."""
    notes = _notes(r)
    body = [notes]
    replay = _replay_html(r.replay) if r.replay is not None else ""
    missed = r.replay is not None and r.replay.missed       # a guard failed: open, like a recompile
    compare = _compare_html(r.compare) if r.compare is not None else ""
    diverged = r.compare is not None and r.compare.diverged     # an op differs from the CPU's: open too
    if r.style == "compact":
        return _wrap(r, notes + _graph_table(r) + replay + compare, open_=bool(notes) or missed or diverged)
    body.append(_graph_table(r))
    body.append(replay)
    body.append(compare)
    body += [_graph_details(g, r) for g in r.graphs]
    if r.torch_compile is not None:
        lines = r.torch_compile.lines()
        body.append(_details(f"torch.compile ({plural(len(r.torch_compile.graphs), 'FX graph')} captured, "
                             f"{plural(len(r.torch_compile.breaks), 'graph break')})",
                             "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>",
                             open_=bool(r.torch_compile.breaks or r.torch_compile.recaptures)))
    if r.devices is not None:
        body.append(r.devices.html())
    if r.eager.compiles or r.eager.executions:
        body.append(_details(_e(eager_line(r.eager).split(":")[0] + f": {r.eager.compiles} compiled, "
                                f"{r.eager.executions} run"), _eager_table(r.eager)))
    if r.pending is not None:
        p = r.pending
        inner = (failure_html(p.failure) if p.failure else "") + _code(
            marked_ir_text(p.ir, p.failure.highlight if p.failure else ()))
        if p.dag is not None:
            inner += _details("DAG", f'<div class="x-scroll">{p.dag.svg}</div>')
        if p.modules is not None:
            inner += modules_html(p.modules, _details)
        title = "partial graph of the failed cell" if p.failure else "pending IR"
        body.append(_details(f"{title} ({plural(p.nodes, 'node')})", inner, open_=p.failure is not None))
    if r.memory is not None:
        body.append(memory_html(r.memory, _details))
    if r.timeline.spans:
        more = f" ({r.timeline.omitted} short spans not drawn)" if r.timeline.omitted else ""
        body.append(_details(f"timeline{more}", r.timeline.svg))
    named = any(not g.eager for g in r.graphs)
    return _wrap(r, "".join(body), open_=bool(notes) or named or missed or diverged or r.style == "full")


def _wrap(r, body: str, open_: bool) -> str:
    summary = _e(summary_line(r)).replace("xlanb", "<b>xlanb</b>", 1)
    return (f'<div class="xlanb-report"><style>{CSS}</style>'
            + _details(summary, body, open_=open_, cls="x-top") + "</div>")
