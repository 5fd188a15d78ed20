"""A graph's IR drawn as a DAG: a layered layout computed in Python, emitted as inline SVG.

Layers come from the longest path from the inputs; within a layer, nodes are ordered by
a few barycenter sweeps and placed near the mean of their neighbours; edges that span
layers are routed through invisible boxes. Beyond `limit` nodes the drawing is
collapsed: single-use chains, the getitems of multi-output ops and single-use inputs
join their neighbour's box, and if that is still too many, each layer (or band of
layers) becomes one box that counts its ops.
No graphviz, no JavaScript: the SVG reads in any HTML renderer.
"""

from __future__ import annotations

import collections
import html

from xlanb.report.model import Dag

LIMIT = 300
LAYER_BOXES = 60        # at most this many boxes when whole layers are collapsed
NODE_H = 34
LAYER_GAP = 28
NODE_GAP = 14
CHAR_W = 6.4
MIN_W, MAX_W = 64, 204
PAD = 8


class _Box:
    __slots__ = ("id", "label", "sub", "title", "kind", "op", "preds", "succs", "layer", "x", "w", "order", "key")

    def __init__(self, id_, label, sub, title, kind, op="", key=""):
        self.id, self.label, self.sub, self.title, self.kind, self.op = id_, label, sub, title, kind, op
        self.key = key                 # a module box: the module it stands for (data-module, for a click)
        self.preds: list[int] = []
        self.succs: list[int] = []
        self.layer = 0
        self.x = 0.0
        self.order = 0.0
        longest = max(len(label), len(sub))
        self.w = min(MAX_W, max(MIN_W, longest * CHAR_W + 16))


def short_op(op: str) -> str:
    """`aten::native_layer_norm.default` -> `native_layer_norm`; inputs read `input`."""
    if op == "xlanb::device_data":
        return "input"
    name = op.split("::", 1)[-1]
    return name.split(".")[0]


def _clip(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _link(boxes: dict[int, _Box]) -> None:
    for b in boxes.values():
        for p in b.preds:
            boxes[p].succs.append(b.id)


def _boxes_from_lines(lines) -> dict[int, _Box]:
    boxes: dict[int, _Box] = {}
    for line in lines:
        kind = "input" if line.is_input else ("root" if line.roots else "op")
        op = short_op(line.op)
        label = f"%{line.index} {op}"
        if line.roots:
            label += " \u2192 out " + ",".join(map(str, line.roots))
        b = _Box(line.index, _clip(label), _clip(line.type), line.text(), kind, op)
        b.preds = list(dict.fromkeys(o for o in line.operands if o in boxes))
        boxes[line.index] = b
    _link(boxes)
    return boxes


def _topological(boxes: dict[int, _Box]) -> list[int] | None:
    """Kahn's order of the boxes, or None if they have a cycle."""
    indegree = {i: len(b.preds) for i, b in boxes.items()}
    ready = collections.deque(sorted(i for i, n in indegree.items() if n == 0))
    order = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for s in boxes[i].succs:
            indegree[s] -= 1
            if indegree[s] == 0:
                ready.append(s)
    return order if len(order) == len(boxes) else None


def _collapse_groups(boxes: dict[int, _Box]) -> dict[int, _Box] | None:
    """Fewer boxes, same shape: single-use chains become one box ("mul > add > relu"), the
    getitems of a multi-output op join it, and inputs read by one op join that op."""
    parent = {i: i for i in boxes}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, b in boxes.items():
        if b.kind == "input" or len(b.preds) != 1:
            continue
        p = boxes[b.preds[0]]
        if p.kind == "input":
            continue
        if (b.kind == "op" and p.kind == "op" and len(p.succs) == 1) or b.op == "getitem":
            parent[find(i)] = find(p.id)
    for i, b in boxes.items():
        if b.kind == "input" and len(b.succs) == 1:
            parent[find(i)] = find(b.succs[0])
    members: dict[int, list[int]] = collections.defaultdict(list)
    for i in boxes:
        members[find(i)].append(i)
    out: dict[int, _Box] = {}
    for head, ids in members.items():
        if len(ids) == 1:
            b = boxes[ids[0]]
            out[head] = _Box(head, b.label, b.sub, b.title, b.kind, b.op)
            continue
        ops = [boxes[i] for i in ids if boxes[i].kind != "input" and boxes[i].op != "getitem"]
        n_in = sum(1 for i in ids if boxes[i].kind == "input")
        outs = [b.label.split(" out ", 1)[1] for i in ids if " out " in (b := boxes[i]).label]
        first = ops[0] if ops else boxes[ids[0]]
        label = f"%{first.id} {first.op}" if len(ops) <= 1 else f"%{ops[0].id}..%{ops[-1].id} {len(ops)} ops"
        if outs:
            label += " \u2192 out " + ",".join(outs)
        sub = " > ".join(b.op for b in ops) if len(ops) > 1 else first.sub
        if n_in:
            sub += f" +{n_in} in"
        title = "\n".join(boxes[i].title for i in ids)
        out[head] = _Box(head, _clip(label, 30), _clip(sub, 32), title, "root" if outs else "group", first.op)
    for head, ids in members.items():
        out[head].preds = list(dict.fromkeys(find(p) for i in ids for p in boxes[i].preds if find(p) != head))
    _link(out)
    return out if _topological(out) is not None else None


def _assign_layers(boxes: dict[int, _Box]) -> list[list[_Box]]:
    """Longest path from the sources; sources then move down to just above their first reader."""
    order = _topological(boxes) or sorted(boxes)
    for i in order:
        b = boxes[i]
        b.layer = 1 + max((boxes[p].layer for p in b.preds), default=-1)
    for b in boxes.values():
        if not b.preds and b.succs:
            b.layer = min(boxes[s].layer for s in b.succs) - 1
    layers: dict[int, list[_Box]] = collections.defaultdict(list)
    for i in order:
        layers[boxes[i].layer].append(boxes[i])
    return [layers[k] for k in sorted(layers)]


def _collapse_layers(lines, limit: int) -> dict[int, _Box]:
    """One box per layer (or per band of layers), counting its ops."""
    boxes = _boxes_from_lines(lines)
    layers = _assign_layers(boxes)
    band = max(1, -(-len(layers) // min(limit, LAYER_BOXES)))
    out: dict[int, _Box] = {}
    of: dict[int, int] = {}
    for k in range(0, len(layers), band):
        members = [b for layer in layers[k:k + band] for b in layer]
        ops = collections.Counter(b.op for b in members)
        top = " ".join(f"{op}\u00d7{n}" for op, n in ops.most_common(3))
        span = f"layer {k}" if band == 1 else f"layers {k}-{min(k + band, len(layers)) - 1}"
        title = "\n".join(f"{op}: {n}" for op, n in ops.most_common())
        out[k] = _Box(k, f"{span}: {len(members)} nodes", _clip(top, 30), title, "group")
        for b in members:
            of[b.id] = k
    for b in boxes.values():
        for p in b.preds:
            src, dst = of[p], of[b.id]
            if src != dst and src not in out[dst].preds:
                out[dst].preds.append(src)
    _link(out)
    return out


DUMMY_W = 6
MAX_DUMMIES = 3000


def _route_long_edges(boxes: dict[int, _Box]) -> dict[tuple[int, int], list[int]]:
    """Edges spanning several layers get a chain of invisible boxes, one per layer crossed, so
    ordering and placement keep them out of the way (Sugiyama's dummy nodes)."""
    spans = sum(max(0, b.layer - boxes[p].layer - 1) for b in boxes.values() for p in b.preds)
    if spans > MAX_DUMMIES:
        return {}
    routes: dict[tuple[int, int], list[int]] = {}
    next_id = -1
    for b in list(boxes.values()):
        for k, p in enumerate(b.preds):
            src = boxes[p]
            if b.layer - src.layer <= 1:
                continue
            chain, prev = [], p
            for layer in range(src.layer + 1, b.layer):
                d = _Box(next_id, "", "", "", "dummy")
                d.w, d.layer, d.preds = DUMMY_W, layer, [prev]
                boxes[d.id] = d
                boxes[prev].succs.append(d.id)
                chain.append(d.id)
                prev, next_id = d.id, next_id - 1
            boxes[prev].succs.append(b.id)
            src.succs.remove(b.id)
            b.preds[k] = prev
            routes[(p, b.id)] = chain
    return routes


def _layers_of(boxes: dict[int, _Box]) -> list[list[_Box]]:
    layers: dict[int, list[_Box]] = collections.defaultdict(list)
    for b in sorted(boxes.values(), key=lambda b: (b.id < 0, abs(b.id))):
        layers[b.layer].append(b)
    return [layers[k] for k in range(max(layers) + 1)] if layers else []


def _order(layers: list[list[_Box]], boxes: dict[int, _Box]) -> None:
    for layer in layers:
        for i, b in enumerate(layer):
            b.order = i
    for sweep in range(6):
        seq = layers[1:] if sweep % 2 == 0 else reversed(layers[:-1])
        for layer in seq:
            for b in layer:
                near = b.preds if sweep % 2 == 0 else b.succs
                if near:
                    b.order = sum(boxes[n].order for n in near) / len(near)
            layer.sort(key=lambda b: b.order)
            for i, b in enumerate(layer):
                b.order = i


def _gap(a: _Box, b: _Box) -> float:
    return NODE_GAP if a.kind != "dummy" and b.kind != "dummy" else 6


def _pack(layer: list[_Box], desired: list[float]) -> None:
    """Positions as close to `desired` as the order and the gaps allow: the mean of a
    left-packed and a right-packed placement (both feasible, so their mean is too)."""
    left, x = [], float("-inf")
    for i, (b, d) in enumerate(zip(layer, desired)):
        if i:
            x += layer[i - 1].w + _gap(layer[i - 1], b)
        x = max(d, x)
        left.append(x)
    right, x = [0.0] * len(layer), float("inf")
    for i in range(len(layer) - 1, -1, -1):
        b = layer[i]
        if i < len(layer) - 1:
            x -= b.w + _gap(b, layer[i + 1])
        x = min(desired[i], x)
        right[i] = x
    for b, lx, rx in zip(layer, left, right):
        b.x = (lx + rx) / 2


def _place(layers: list[list[_Box]], boxes: dict[int, _Box]) -> float:
    """x of each box: near the mean of its neighbours, without overlaps. Returns the width."""
    for layer in layers:                  # start packed to the left
        x = 0.0
        for i, b in enumerate(layer):
            b.x = x
            x += b.w + (_gap(b, layer[i + 1]) if i + 1 < len(layer) else 0)
    for sweep in range(8):
        down = sweep % 2 == 0
        for layer in (layers if down else reversed(layers)):
            desired = []
            for b in layer:
                near = b.preds if down else b.succs
                centers = [boxes[n].x + boxes[n].w / 2 for n in near]
                desired.append(sum(centers) / len(centers) - b.w / 2 if centers else b.x)
            _pack(layer, desired)
    left = min(b.x for layer in layers for b in layer)
    for layer in layers:
        for b in layer:
            b.x -= left
    return max(b.x + b.w for layer in layers for b in layer)


_FILL = {"input": "#e3effd", "root": "#fff4d6", "op": "#ffffff", "group": "#eef5ea"}
_STROKE = {"input": "#5b8fd1", "root": "#c98a00", "op": "#8a8f98", "group": "#5f9a4f"}


def _edge_path(points: list[tuple[float, float]]) -> str:
    """Curves between rows, straight lines through the rows that dummy boxes occupy."""
    (x, y), rest = points[0], points[1:]
    d = [f"M{x:.1f},{y:.1f}"]
    for i, (nx, ny) in enumerate(rest):
        if i % 2 == 0:
            mid = (y + ny) / 2
            d.append(f"C{x:.1f},{mid:.1f} {nx:.1f},{mid:.1f} {nx:.1f},{ny:.1f}")
        else:
            d.append(f"L{nx:.1f},{ny:.1f}")
        x, y = nx, ny
    return "".join(d)


def _svg(layers: list[list[_Box]], boxes: dict[int, _Box], edges, routes, width: float) -> str:
    height = len(layers) * (NODE_H + LAYER_GAP) - LAYER_GAP
    w, h = width + 2 * PAD, height + 2 * PAD

    def top(i: int) -> float:
        return boxes[i].layer * (NODE_H + LAYER_GAP) + PAD

    def cx(i: int) -> float:
        return boxes[i].x + boxes[i].w / 2 + PAD

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="xlanb-dag" width="{w:.0f}" height="{h:.0f}" '
           f'viewBox="0 0 {w:.0f} {h:.0f}" font-family="ui-monospace,SFMono-Regular,Menlo,Consolas,monospace" '
           'font-size="11">',
           '<defs><marker id="xa" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" '
           'orient="auto"><path d="M0,0L8,4L0,8z" fill="#8a8f98"/></marker></defs>', '<g fill="none" '
           'stroke="#a0a6ae" stroke-width="1.2">']
    for p, b in edges:
        points = [(cx(p), top(p) + NODE_H)]
        for d in routes.get((p, b), ()):
            points += [(cx(d), top(d)), (cx(d), top(d) + NODE_H)]
        points.append((cx(b), top(b) - 1))
        out.append(f'<path d="{_edge_path(points)}" marker-end="url(#xa)"/>')
    out.append("</g>")
    for b in boxes.values():
        if b.kind == "dummy":
            continue
        x, y = b.x + PAD, top(b.id)
        sw = 2 if b.kind == "root" else 1
        data = f' class="xlanb-dag-module" data-module="{html.escape(b.key)}"' if b.key else ""
        out.append(f'<g{data}><title>{html.escape(b.title)}</title>'
                   f'<rect x="{x:.1f}" y="{y}" width="{b.w:.1f}" height="{NODE_H}" rx="5" fill="{_FILL[b.kind]}" '
                   f'stroke="{_STROKE[b.kind]}" stroke-width="{sw}"/>'
                   f'<text x="{x + b.w / 2:.1f}" y="{y + 14}" text-anchor="middle" fill="#1f2328" '
                   f'font-weight="600">{html.escape(b.label)}</text>'
                   f'<text x="{x + b.w / 2:.1f}" y="{y + 27}" text-anchor="middle" fill="#57606a" '
                   f'font-size="10">{html.escape(b.sub)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def layout(boxes: dict[int, _Box], nodes: int, collapsed: str) -> Dag:
    """Layers, ordering, placement and the SVG of linked boxes."""
    _assign_layers(boxes)
    drawn = len(boxes)
    edges = [(p, b.id) for b in boxes.values() for p in b.preds]
    routes = _route_long_edges(boxes)
    layers = _layers_of(boxes)
    _order(layers, boxes)
    width = _place(layers, boxes)
    return Dag(nodes, drawn, collapsed, _svg(layers, boxes, edges, routes, width))


def draw_dag(lines, limit: int = LIMIT) -> Dag | None:
    """The DAG of a graph's IR lines (ir.graph.IrLine), collapsed beyond `limit` nodes."""
    lines = tuple(lines)
    if not lines:
        return None
    boxes = _boxes_from_lines(lines)
    collapsed = "none"
    if len(boxes) > limit:
        boxes, collapsed = _collapse_groups(boxes), "groups"
        if boxes is None or len(boxes) > limit:
            boxes, collapsed = _collapse_layers(lines, limit), "layers"
    return layout(boxes, len(lines), collapsed)
