"""The report's devices section: shardings after propagation drawn as tiles (SVG and text), the
collectives the SPMD partitioner inserted, memory per device, and the host's waits for data."""

from __future__ import annotations

import dataclasses
import html

from xlanb import events as ev
from xlanb.report.format import format_bytes, format_ms

_COLORS = ("#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f", "#cab2d6", "#ffff99", "#8dd3c7", "#bebada",
           "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f", "#80b1d3", "#fdb462", "#b3de69")


@dataclasses.dataclass(frozen=True)
class ShardingPicture:
    index: int
    type: str
    text: str                 # "('data', None) on mesh data=8"
    hlo: str
    picture: str              # the tiles as text
    svg: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class GraphSharding:
    name: str
    key: str
    devices: int
    mesh: str
    inputs: tuple[ShardingPicture, ...]
    outputs: tuple[ShardingPicture, ...]
    collectives: tuple[dict, ...]
    memory: dict

    def to_json(self) -> dict:
        return {"name": self.name, "key": self.key, "devices": self.devices, "mesh": self.mesh,
                "inputs": [p.to_json() for p in self.inputs], "outputs": [p.to_json() for p in self.outputs],
                "collectives": list(self.collectives), "memory": dict(self.memory)}


@dataclasses.dataclass(frozen=True)
class LoaderSection:
    steps: int
    wait_ms: tuple[float, ...]          # per batch taken, how long the host waited
    uploads: int
    upload_bytes: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"wait_ms": list(self.wait_ms)}


def _devices_label(devices: tuple[int, ...]) -> str:
    if len(devices) <= 3:
        return ",".join(map(str, devices))
    if list(devices) == list(range(devices[0], devices[0] + len(devices))):
        return f"{devices[0]}-{devices[-1]}"
    return ",".join(map(str, devices[:2])) + f",+{len(devices) - 2}"


def tile_text(info: ev.ShardingInfo, width: int = 48) -> str:
    """A box per tile, as jax.debug.visualize_array_sharding draws it, in plain characters:
    each cell names the devices holding that block."""
    if not info.tiles:
        return f"{info.type} {info.text}"
    rows = sorted({(t.r0, t.r1) for t in info.tiles})
    cols = sorted({(t.c0, t.c1) for t in info.tiles})
    by_block = {(t.r0, t.r1, t.c0, t.c1): t.devices for t in info.tiles}
    cell = max(6, min(width // max(len(cols), 1), max(len("dev " + _devices_label(t.devices)) + 2 for t in info.tiles)))
    line = "+" + "+".join("-" * cell for _ in cols) + "+"
    out = [f"{info.type} {info.text}", line]
    for r in rows:
        cells = []
        for c in cols:
            devices = by_block.get((r[0], r[1], c[0], c[1]))
            label = "dev " + _devices_label(devices) if devices else "?"
            cells.append(label.center(cell))
        out.append("|" + "|".join(cells) + "|")
        out.append(line)
    return "\n".join(out)


def tile_svg(info: ev.ShardingInfo, width: int = 220, height: int = 120) -> str:
    """The tiles as an SVG: the array's 2-D view scaled into a box, one colour per device group."""
    rows, cols = max(info.rows, 1), max(info.cols, 1)
    aspect = rows / cols
    w = width if aspect <= height / width else max(40, int(height / aspect))
    h = max(24, min(height, int(w * aspect)))
    if not info.tiles:
        return ""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="xlanb-tiles" width="{w + 2}" height="{h + 2}" '
             f'viewBox="0 0 {w + 2} {h + 2}" role="img" aria-label="{html.escape(info.type + " " + info.text)}">']
    groups: dict = {}
    for t in info.tiles:
        color = _COLORS[groups.setdefault(t.devices, len(groups)) % len(_COLORS)]
        x, y = 1 + t.c0 * w / cols, 1 + t.r0 * h / rows
        tw, th = (t.c1 - t.c0) * w / cols, (t.r1 - t.r0) * h / rows
        label = html.escape(_devices_label(t.devices))
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{tw:.1f}" height="{th:.1f}" fill="{color}" '
                     f'stroke="#333" stroke-width="1"><title>devices {", ".join(map(str, t.devices))}: rows '
                     f'{t.r0}:{t.r1}, columns {t.c0}:{t.c1}</title></rect>')
        if tw >= 14 and th >= 10:
            parts.append(f'<text x="{x + tw / 2:.1f}" y="{y + th / 2 + 4:.1f}" font-size="{min(11, th * 0.6):.0f}" '
                         f'text-anchor="middle" font-family="monospace">{label}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _picture(info: ev.ShardingInfo) -> ShardingPicture:
    return ShardingPicture(info.index, info.type, info.text, info.hlo, tile_text(info), tile_svg(info))


def graph_sharding(e: ev.Partitioned) -> GraphSharding:
    return GraphSharding(
        e.name, e.key, e.devices, e.mesh, tuple(_picture(i) for i in e.inputs), tuple(_picture(o) for o in e.outputs),
        tuple({"op": c.op, "type": c.type, "bytes": c.nbytes, "groups": c.groups, "hlo": c.line}
              for c in e.collectives),
        dict(e.memory))


def sharding_sections(evs) -> tuple[GraphSharding, ...]:
    """One entry per graph compiled for several devices in these events."""
    return tuple(graph_sharding(e) for e in evs if isinstance(e, ev.Partitioned))


def loader_section(evs) -> LoaderSection | None:
    waits = [e for e in evs if isinstance(e, ev.LoaderWait)]
    uploads = [e for e in evs if isinstance(e, ev.BatchUpload)]
    if not waits and not uploads:
        return None
    return LoaderSection(len(waits), tuple(round(e.ns / 1e6, 3) for e in waits), len(uploads),
                         sum(e.nbytes for e in uploads))


def _memory_text(memory: dict) -> str:
    parts = [(k.removesuffix("_size_in_bytes"), v) for k, v in memory.items()
             if k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")]
    return ", ".join(f"{k} {format_bytes(v)}" for k, v in parts)


def devices_text(sections, loader: LoaderSection | None = None, pictures: bool = True) -> list[str]:
    """The devices section as text lines (render_text appends them)."""
    out = []
    for g in sections:
        head = f"  graph {g.name} on {g.devices} devices" + (f" ({g.mesh})" if g.mesh else "")
        mem = _memory_text(g.memory)
        out.append(head + (f"; per device: {mem}" if mem else ""))
        for title, items in (("input", g.inputs), ("output", g.outputs)):
            for p in items:
                out.append(f"    {title} {p.index}: {p.type} {p.text}")
                if pictures and "replicated" not in p.text and p.text != "one device":
                    out += ["      " + line for line in p.picture.splitlines()[1:]]
        if g.collectives:
            for c in g.collectives:
                out.append(f"    {c['op']} {c['type']} ({format_bytes(c['bytes'])}) groups {c['groups']}")
        else:
            out.append("    no collectives")
    if loader is not None:
        waits = ", ".join(format_ms(w) for w in loader.wait_ms[:12]) + (" ..." if len(loader.wait_ms) > 12 else "")
        out.append(f"  DeviceLoader: {loader.uploads} batches uploaded ({format_bytes(loader.upload_bytes)}); "
                   f"host waited for data per step: {waits or '-'}")
    return out


def devices_html(sections, loader: LoaderSection | None = None) -> str:
    """The devices section as HTML (pictures inline, readable without CSS or JS)."""
    e = html.escape
    parts = []
    for g in sections:
        rows = []
        for title, items in (("input", g.inputs), ("output", g.outputs)):
            for p in items:
                rows.append(f"<tr><td>{title} {p.index}</td><td><code>{e(p.type)}</code></td><td>{e(p.text)}</td>"
                            f"<td>{p.svg}</td></tr>")
        coll = "".join(f"<li><code>{e(c['op'])}</code> {e(c['type'])} ({e(format_bytes(c['bytes']))}), groups "
                       f"<code>{e(c['groups'])}</code></li>" for c in g.collectives) or "<li>no collectives</li>"
        mem = _memory_text(g.memory)
        parts.append(f"<details open><summary>graph {e(g.name)} on {g.devices} devices {e(g.mesh)}"
                     f"{(' &middot; per device: ' + e(mem)) if mem else ''}</summary>"
                     f"<table>{''.join(rows)}</table><p>collectives:</p><ul>{coll}</ul></details>")
    if loader is not None:
        parts.append(f"<p>DeviceLoader: {loader.uploads} batches uploaded; host waited per step: "
                     f"{e(', '.join(format_ms(w) for w in loader.wait_ms[:24]))}</p>")
    return f'<details><summary>devices</summary>{"".join(parts)}</details>' if parts else ""


@dataclasses.dataclass(frozen=True)
class DevicesSection:
    """The report's `devices` field (schema 1.3): partitioned graphs and the device loader."""
    graphs: tuple[GraphSharding, ...] = ()
    loader: LoaderSection | None = None

    def to_json(self) -> dict:
        return {"graphs": [g.to_json() for g in self.graphs],
                "loader": self.loader.to_json() if self.loader is not None else None}

    def text_lines(self, pictures: bool = True) -> list[str]:
        return devices_text(self.graphs, self.loader, pictures)

    def html(self) -> str:
        return devices_html(self.graphs, self.loader)


def devices_section(evs) -> DevicesSection | None:
    """None when no graph ran on several devices and no DeviceLoader was used."""
    graphs, loader = sharding_sections(evs), loader_section(evs)
    return DevicesSection(graphs, loader) if graphs or loader is not None else None


_picture_schema = {"type": "object", "required": ["index", "type", "text", "picture", "svg"], "properties": {
    "index": {"type": "integer", "minimum": 0}, "type": {"type": "string"}, "text": {"type": "string"},
    "hlo": {"type": "string"}, "picture": {"type": "string"}, "svg": {"type": "string"}}}
DEVICES_SCHEMA = {"type": ["object", "null"], "required": ["graphs", "loader"], "properties": {
    "graphs": {"type": "array", "items": {"type": "object", "required": ["name", "key", "devices", "inputs", "outputs",
                                                                        "collectives"], "properties": {
        "name": {"type": "string"}, "key": {"type": "string"}, "devices": {"type": "integer", "minimum": 1},
        "mesh": {"type": "string"}, "inputs": {"type": "array", "items": _picture_schema},
        "outputs": {"type": "array", "items": _picture_schema},
        "collectives": {"type": "array", "items": {"type": "object", "required": ["op", "type", "bytes", "groups"],
                                                   "properties": {"op": {"type": "string"}, "type": {"type": "string"},
                                                                  "bytes": {"type": "integer", "minimum": 0},
                                                                  "groups": {"type": "string"},
                                                                  "hlo": {"type": "string"}}}},
        "memory": {"type": "object", "additionalProperties": {"type": "number"}}}}},
    "loader": {"type": ["object", "null"], "required": ["steps", "wait_ms", "uploads", "upload_bytes"], "properties": {
        "steps": {"type": "integer", "minimum": 0}, "wait_ms": {"type": "array", "items": {"type": "number"}},
        "uploads": {"type": "integer", "minimum": 0}, "upload_bytes": {"type": "integer", "minimum": 0}}}}}
