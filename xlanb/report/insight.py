"""Text and HTML of the report's newer sections: ops by module, fusions traced to source,
device memory by variable, and the failure behind a partial graph (schema 1.2).

The HTML follows html.py's rules: `<details>`, `<table>` and inline SVG only, so a module
box expands (a `<details>` per module) with scripts disabled.
"""

from __future__ import annotations

import html

from xlanb.report.format import format_bytes, format_flops, plural

_TABLE = 'border="1" cellpadding="3" cellspacing="0"'
TEXT_MODULES = 12
TEXT_FUSIONS = 12


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _signed(n) -> str:
    if n is None:
        return "new"
    if n == 0:
        return "="
    return ("+" if n > 0 else "-") + format_bytes(abs(n))


# --- text ------------------------------------------------------------------------------------

def modules_line(view) -> str:
    groups = sorted(view.groups, key=lambda g: -g.ops)
    shown = ", ".join(f"{g.path} {g.ops}" for g in groups[:TEXT_MODULES])
    more = f", ... ({len(groups)} in all)" if len(groups) > TEXT_MODULES else ""
    return f"ops by module: {shown}{more}"


def fusion_cost(f) -> str:
    """`4.19 MFLOP, 224.0 KiB accessed` from XLA's cost analysis of the fusion ("" without one)."""
    if f.flops is None:
        return ""
    return f"{format_flops(f.flops)}, {format_bytes(f.bytes_accessed)} accessed"


def fusion_lines(fusions, full: bool) -> list[str]:
    shown = fusions if full else fusions[:TEXT_FUSIONS]
    out = [f"fusion {f.text}" + (f" ({cost})" if (cost := fusion_cost(f)) else "") for f in shown]
    if len(shown) < len(fusions):
        out.append(f"... {len(fusions) - len(shown)} more fusions (%xla_report full shows all)")
    return out


def memory_lines(m) -> list[str]:
    out = [m.text]
    for h in m.holders:
        pending = f", {h.pending} pending" if h.pending else ""
        out.append(f"  {h.name} ({h.kind}, {plural(h.tensors, 'tensor')}{pending}): {format_bytes(h.bytes)} "
                   f"[{_signed(h.change)}]")
    if m.others:
        out.append(f"  ... {m.others} more holders: {format_bytes(m.others_bytes)}")
    out += [f"warning: {w}" for w in m.warnings]
    return out


def failure_line(f) -> str:
    source = f": {f.where.source}" if f.where and f.where.source else ""
    return f"{f.text}{source}" + (f" (IR lines {', '.join(f'%{i}' for i in f.highlight)} are from that line)"
                                  if f.highlight else "")


# --- HTML ------------------------------------------------------------------------------------

def modules_html(view, details) -> str:
    rows = "".join(f"<tr><td><code>{_e(g.path)}</code></td><td class=num>{g.ops}</td><td class=num>{g.total}</td>"
                   f"<td><code>{_e(g.top)}</code></td></tr>" for g in view.groups)
    table = (f"<table {_TABLE} class=x-modules><tr><th>module</th><th>own ops</th><th>with submodules</th>"
             f"<th>most common</th></tr>{rows}</table>")
    body = table
    if view.dag is not None:
        body += f'<div class="x-scroll">{view.dag.svg}</div>'
        for key, dag in view.expanded:
            body += details(f"expand <code>{_e(key)}</code> ({plural(dag.nodes, 'node')})",
                            f'<div class="x-scroll">{dag.svg}</div>', cls="x-module")
    return details(f"by module ({plural(len(view.groups), 'module')})", body, cls="x-by-module")


def fusions_html(fusions, graph_key: str, details) -> str:
    rows = "".join(
        f'<tr id="{_e(fusion_anchor(graph_key, f.name))}"><td><code>{_e(f.name)}</code></td>'
        f"<td>{_e(f.kind)}</td><td><code>{_e(', '.join(f.ops))}</code></td><td>{_e(', '.join(f.modules))}</td>"
        f"<td class=where>{_e(', '.join(f.lines))}</td><td class=num>{format_bytes(f.out_bytes)}</td>"
        f"<td class=num>{'' if f.flops is None else format_flops(f.flops)}</td>"
        f"<td class=num>{'' if f.bytes_accessed is None else format_bytes(f.bytes_accessed)}</td></tr>"
        for f in fusions)
    table = (f"<table {_TABLE} class=x-fusions><tr><th>fusion</th><th>kind</th><th>ATen ops</th><th>modules</th>"
             f"<th>lines</th><th>writes</th><th>flops</th><th>bytes accessed</th></tr>{rows}</table>")
    return details(f"fusions ({len(fusions)})", table, cls="x-fusions-details")


def fusion_anchor(graph_key: str, name: str) -> str:
    return f"xlanb-fusion-{graph_key[:8]}-{name}"


def link_fusions(code_html: str, fusions, graph_key: str) -> str:
    """Each fusion's name in the highlighted optimized HLO becomes a link to its row (no script needed)."""
    for f in fusions:
        span = f'<span class="h-name">%{_e(f.name)}</span>'
        code_html = code_html.replace(
            span, f'<a href="#{_e(fusion_anchor(graph_key, f.name))}" title="{_e(f.text)}">{span}</a>')
    return code_html


def memory_html(m, details) -> str:
    rows = "".join(f"<tr><td><code>{_e(h.name)}</code></td><td>{_e(h.kind)}</td><td class=num>{h.tensors}</td>"
                   f"<td class=num>{format_bytes(h.bytes)}</td><td class=num>{_e(_signed(h.change))}</td></tr>"
                   for h in m.holders)
    if m.others:
        rows += (f"<tr><td colspan=3 class=x-muted>{m.others} more</td><td class=num>{format_bytes(m.others_bytes)}"
                 "</td><td></td></tr>")
    table = (f"<table {_TABLE} class=x-memory><tr><th>held by</th><th>kind</th><th>tensors</th><th>bytes</th>"
             f"<th>since previous cell</th></tr>{rows}</table>")
    warn = "".join(f"<p><b>warning:</b> {_e(w)}</p>" for w in m.warnings)
    stats = ""
    if m.stats:
        stats = "<p class=x-muted>device memory_stats: " + _e(", ".join(
            f"{k}={format_bytes(v) if 'bytes' in k else v}" for k, v in list(m.stats.items())[:8])) + "</p>"
    return details(_e(m.text), warn + table + stats, cls="x-memory-details")


def failure_html(f) -> str:
    source = f" <code>{_e(f.where.source)}</code>" if f.where and f.where.source else ""
    return f'<p class="x-failure"><b>{_e(f.text)}</b>{source}</p>'
