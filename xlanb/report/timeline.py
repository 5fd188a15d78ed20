"""A small timeline of one cell: lowering, compiling, executing and transfers as bars in lanes."""

from __future__ import annotations

import html

LANES = ("lower", "compile", "execute", "transfer")
COLORS = {"lower": "#9db7e0", "compile": "#3d6fb6", "execute": "#4c9a52", "transfer": "#c98a00"}
WIDTH, LANE_H, LABEL_W, AXIS_H = 560, 14, 64, 16


def _tick_step(end_ms: float) -> float:
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000):
        if end_ms / step <= 6:
            return step
    return end_ms / 5


def _fmt(ms: float) -> str:
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms:g} ms"


def timeline_svg(spans, end_ms: float) -> str:
    """Bars on a shared time axis (ms from the start of the cell); each bar's tooltip names it."""
    end_ms = max(end_ms, max((s.start_ms + s.ms for s in spans), default=0.0), 0.001)
    lanes = [lane for lane in LANES if any(s.kind == lane for s in spans)]
    plot_w = WIDTH - LABEL_W - 8
    scale = plot_w / end_ms
    height = len(lanes) * (LANE_H + 4) + AXIS_H + 4
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="xlanb-timeline" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="system-ui,sans-serif" font-size="10">']
    for i, lane in enumerate(lanes):
        y = i * (LANE_H + 4) + 2
        out.append(f'<text x="{LABEL_W - 6}" y="{y + LANE_H - 3}" text-anchor="end" fill="#57606a">{lane}</text>')
        out.append(f'<rect x="{LABEL_W}" y="{y}" width="{plot_w}" height="{LANE_H}" fill="#f3f4f6"/>')
        for s in spans:
            if s.kind != lane:
                continue
            x = LABEL_W + s.start_ms * scale
            w = max(1.0, s.ms * scale)
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{LANE_H}" fill="{COLORS[lane]}">'
                       f'<title>{html.escape(s.name)}: {s.kind} {s.ms:.3f} ms at {s.start_ms:.1f} ms</title></rect>')
    axis_y = len(lanes) * (LANE_H + 4) + 2
    out.append(f'<line x1="{LABEL_W}" y1="{axis_y}" x2="{LABEL_W + plot_w}" y2="{axis_y}" stroke="#8a8f98"/>')
    step = _tick_step(end_ms)
    t = 0.0
    while t <= end_ms + 1e-9:
        x = LABEL_W + t * scale
        out.append(f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 3}" stroke="#8a8f98"/>'
                   f'<text x="{x:.1f}" y="{axis_y + 13}" text-anchor="middle" fill="#57606a">{_fmt(round(t, 3))}</text>')
        t += step
    out.append("</svg>")
    return "".join(out)
