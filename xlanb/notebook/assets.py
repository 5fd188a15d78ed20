"""The report widget's JavaScript (an anywidget ESM module) and CSS, as Python strings.

Kept in Python so the wheel needs no package data. The ESM renders the report JSON
(docs/report-schema.md); its highlighter uses the regex of xlanb/report/hlo.py.
"""

from __future__ import annotations

import json

from xlanb.report.hlo import CLASSES, PATTERN

_ESM = r"""
const PATTERN = __PATTERN__;
const CLASSES = __CLASSES__;

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

export function highlight(text) {
  const re = new RegExp(PATTERN, "g");
  let out = "", pos = 0, m;
  while ((m = re.exec(text)) !== null) {
    if (m[0].length === 0) { re.lastIndex++; continue; }
    const kind = Object.keys(m.groups).find((k) => m.groups[k] !== undefined);
    out += esc(text.slice(pos, m.index)) + `<span class="h-${CLASSES[kind]}">${esc(m[0])}</span>`;
    pos = m.index + m[0].length;
  }
  return out + esc(text.slice(pos));
}

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "html") el.innerHTML = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c);
  return el;
}

function ms(v) {
  if (v >= 1000) return (v / 1000).toFixed(2) + " s";
  return v >= 1 ? v.toFixed(1) + " ms" : v.toFixed(2) + " ms";
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

function tensors(list) {
  if (!list.length) return "()";
  const shown = list.slice(0, 6).map((t) => t.text).join(", ");
  return list.length > 6 ? `${shown}, ... (${list.length} in all)` : shown;
}

function where(w) { return w ? w.text : ""; }

function tabs(items, initial = 0) {
  // items: [label, () => element]; panels are built on first view
  const bar = h("div", { class: "xw-tabs", role: "tablist" });
  const body = h("div", { class: "xw-panel" });
  const built = new Map();
  const buttons = items.map(([label, make], i) => {
    const b = h("button", { class: "xw-tab", role: "tab", text: label, onclick: () => show(i) });
    bar.append(b);
    return b;
  });
  function show(i) {
    buttons.forEach((b, j) => b.classList.toggle("active", i === j));
    if (!built.has(i)) built.set(i, items[i][1]());
    body.replaceChildren(built.get(i));
  }
  if (items.length) show(initial);
  return h("div", { class: "xw-tabbox" }, bar, body);
}

function code(text, { hideMeta = false } = {}) {
  const box = h("div", { class: "xw-codebox" });
  const pre = h("pre", { class: "xw-code" });
  const render = (hide) => {
    const t = hide ? text.replace(/,? ?metadata=\{[^\n]*?\}(?=,\s|\n|$)/g, "") : text;
    pre.innerHTML = highlight(t);
  };
  if (/metadata=\{/.test(text)) {
    const cb = h("input", { type: "checkbox" });
    cb.checked = hideMeta;
    cb.addEventListener("change", () => render(cb.checked));
    box.append(h("label", { class: "xw-opt" }, cb, " hide metadata"));
  }
  render(hideMeta && /metadata=\{/.test(text));
  box.append(pre);
  return box;
}

function table(head, rows) {
  const t = h("table", { class: "xw-table" });
  t.append(h("tr", {}, ...head.map((x) => h("th", { text: x }))));
  for (const r of rows) t.append(h("tr", {}, ...r.map((x) => (x instanceof Node ? h("td", {}, x) : h("td", { text: String(x) })))));
  return t;
}

function svgBox(svg) { return h("div", { class: "xw-svg", html: svg }); }

function notes(r) {
  const ul = h("ul", { class: "xw-notes" });
  const add = (kind, label, text) => ul.append(h("li", {}, h("span", { class: `xw-tag xw-${kind}`, text: label }), text));
  for (const g of r.graphs) if (g.recompile) add("recompile", "recompiled", `graph ${g.name}: ${g.recompile.text}`);
  for (const f of r.forced) {
    const at = f.where ? ` at ${f.where.text}` : "";
    const src = f.where && f.where.source ? `: ${f.where.source}` : "";
    const n = f.count > 1 ? ` (x${f.count})` : "";
    add(f.kind === "violation" ? "error" : "forced", f.kind === "violation" ? "violation" : "forced",
        `${f.cause} in graph ${f.graph}${at}${src}${n}`);
  }
  for (const f of r.fallbacks) {
    const g = f.graphs.length ? ` in graph ${f.graphs.join(", ")}` : "";
    add("fallback", "CPU fallback", `${f.op} (${f.reason})${g}${f.where ? " at " + f.where.text : ""}`);
  }
  for (const e of r.errors) if (!e.startsWith("Unexpected execution")) add("error", "error", e);
  if (r.pending) {
    const p = r.pending;
    const held = p.tensors.map((t) => `${t.name} (${t.type})`).join(", ");
    add("pending", "pending", `${p.nodes} nodes left behind, held by ${held}${p.unnamed ? (held ? "; " : "") + p.unnamed + " unnamed" : ""}`);
  }
  return ul.children.length ? ul : null;
}

function graphCard(g) {
  const title = h("div", { class: "xw-ghead" },
    h("b", { text: g.name }), h("code", { text: ` [${g.key.slice(0, 8)}]` }),
    h("span", { class: "xw-muted", text: ` ${g.nodes} ops \u00b7 lower ${ms(g.lower_ms)} \u00b7 compile ${ms(g.compile_ms)}${g.persistent_hit ? " (disk cache)" : ""} \u00b7 ran ${g.executions}x` }));
  const items = [["Overview", () => {
    const rows = [["cause", g.cause + (g.where ? ` at ${g.where.text}` : "")],
                  ["inputs", tensors(g.inputs) + (g.scalars ? ` + ${g.scalars} scalars` : "")],
                  ["outputs", tensors(g.outputs)],
                  ["execute", `${g.executions}x, ${ms(g.execute_ms)}`]];
    if (g.where && g.where.source) rows.splice(1, 0, ["line", g.where.source]);
    if (g.recompile) rows.push(["why it recompiled", g.recompile.text]);
    if (g.fallback_ops.length) rows.push(["CPU fallback ops", g.fallback_ops.join(", ")]);
    return table(["", ""], rows);
  }], [`IR (${g.ir.nodes})`, () => code(g.ir.text)]];
  if (g.dag) items.push(["DAG", () => svgBox(g.dag.svg)]);
  if (g.hlo && g.hlo.stablehlo) items.push(["StableHLO", () => code(g.hlo.stablehlo.text)]);
  if (g.hlo && g.hlo.optimized) items.push(["Optimized HLO", () => code(g.hlo.optimized.text, { hideMeta: true })]);
  if (g.cost || g.memory) items.push(["Cost", () => {
    const box = h("div");
    if (g.cost) box.append(h("b", { text: "cost analysis" }), table(["", ""], Object.entries(g.cost).map(([k, v]) => [k, k.includes("bytes") ? bytes(v) : v.toLocaleString()])));
    if (g.memory) box.append(h("b", { text: "memory analysis" }), table(["", ""], Object.entries(g.memory).map(([k, v]) => [k, bytes(v)])));
    return box;
  }]);
  return h("div", { class: "xw-card" }, title, tabs(items));
}

function sections(r) {
  const items = [];
  if (r.graphs.length || r.cached.length) items.push([`Graphs (${r.graphs.length + r.cached.length})`, () => {
    const box = h("div");
    for (const g of r.graphs) box.append(graphCard(g));
    if (r.cached.length) box.append(table(["graph from cache", "key", "runs", "execute"],
      r.cached.map((c) => [c.name, c.key.slice(0, 8), c.executions, ms(c.execute_ms)])));
    return box;
  }]);
  if (r.eager.compiles || r.eager.executions) items.push([`Eager ops (${r.eager.compiles})`, () => h("div", {},
    h("p", { class: "xw-muted", text: `${r.eager.compiles} compiled (${ms(r.eager.compile_ms)}), ${r.eager.executions} run (${ms(r.eager.execute_ms)})` }),
    r.eager.ops.length ? table(["op", "signature", "compiles", "compile"], r.eager.ops.map((o) => [o.op, o.signature, o.compiles, ms(o.compile_ms)])) : null)]);
  if (r.pending) items.push([`Pending (${r.pending.nodes})`, () => tabs(
    [["IR", () => code(r.pending.ir.text)]].concat(r.pending.dag ? [["DAG", () => svgBox(r.pending.dag.svg)]] : []))]);
  if (r.timeline.spans.length) items.push(["Timeline", () => svgBox(r.timeline.svg)]);
  return items.length ? tabs(items) : null;
}

export function renderReport(el, r) {
  el.replaceChildren();
  if (!r || !r.version) { el.append(h("div", { class: "xw-muted", text: "xlanb: no report" })); return; }
  if (!String(r.version).startsWith("1.")) {
    el.append(h("pre", { text: r.text || "xlanb: report version " + r.version + " is newer than this widget" }));
    return;
  }
  const root = h("details", { class: "xlanb-w" });
  const n = notes(r);
  if (n || r.cell.style === "full" || r.graphs.some((g) => !g.eager)) root.open = true;
  root.append(h("summary", {}, h("span", { class: "xw-brand", text: "xlanb" }),
                h("span", { class: "xw-mode", text: r.cell.mode }), r.summary.text.replace(/^xlanb \[\w+\]: /, "")));
  if (n) root.append(n);
  if (r.cell.style !== "compact") { const s = sections(r); if (s) root.append(s); }
  else if (r.graphs.length) root.append(table(["graph", "key", "ops", "inputs", "outputs", "compile", "runs"],
    r.graphs.map((g) => [g.name, g.key.slice(0, 8), g.nodes, tensors(g.inputs), tensors(g.outputs),
                         ms(g.lower_ms + g.compile_ms), g.executions])));
  el.append(root);
}

function render({ model, el }) {
  const draw = () => renderReport(el, model.get("report"));
  draw();
  model.on("change:report", draw);
  return () => model.off("change:report", draw);
}

export default { render };
"""

CSS = r"""
.xlanb-w{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45;
  color:var(--jp-content-font-color1,#1f2328);border:1px solid var(--jp-border-color2,#d0d7de);border-radius:6px;
  padding:4px 10px;background:var(--jp-layout-color1,#fff)}
.xlanb-w>summary{cursor:pointer;padding:3px 0}
.xlanb-w .xw-brand{font-weight:700;color:#3d6fb6;margin-right:6px}
.xlanb-w .xw-mode{font-size:11px;border:1px solid var(--jp-border-color1,#8c959f);border-radius:9px;padding:0 6px;
  margin-right:8px;color:var(--jp-content-font-color2,#57606a)}
.xlanb-w .xw-notes{margin:4px 0 8px 0;padding-left:4px;list-style:none}
.xlanb-w .xw-notes li{margin:2px 0}
.xlanb-w .xw-tag{display:inline-block;min-width:7.5em;font-size:11px;font-weight:600;border-radius:3px;
  padding:0 5px;margin-right:6px;text-align:center;color:#fff}
.xlanb-w .xw-recompile{background:#8250df}.xlanb-w .xw-forced{background:#bc4c00}
.xlanb-w .xw-fallback{background:#cf222e}.xlanb-w .xw-error{background:#82071e}.xlanb-w .xw-pending{background:#6e7781}
.xlanb-w .xw-tabs{display:flex;gap:2px;border-bottom:1px solid var(--jp-border-color2,#d0d7de);margin-top:4px;flex-wrap:wrap}
.xlanb-w .xw-tab{font:inherit;font-size:12px;border:1px solid transparent;border-bottom:none;background:none;
  padding:3px 10px;cursor:pointer;color:var(--jp-content-font-color2,#57606a);border-radius:4px 4px 0 0}
.xlanb-w .xw-tab:hover{background:var(--jp-layout-color2,#f6f8fa)}
.xlanb-w .xw-tab.active{border-color:var(--jp-border-color2,#d0d7de);background:var(--jp-layout-color1,#fff);
  color:var(--jp-content-font-color1,#1f2328);font-weight:600;margin-bottom:-1px}
.xlanb-w .xw-panel{padding:6px 0}
.xlanb-w .xw-card{border:1px solid var(--jp-border-color2,#d0d7de);border-radius:5px;padding:4px 8px;margin:6px 0}
.xlanb-w .xw-ghead code{font-size:12px}
.xlanb-w .xw-muted{color:var(--jp-content-font-color2,#57606a)}
.xlanb-w .xw-table{border-collapse:collapse;font-size:12px;margin:4px 0}
.xlanb-w .xw-table th,.xlanb-w .xw-table td{border:1px solid var(--jp-border-color2,#d0d7de);padding:2px 6px;text-align:left;
  vertical-align:top}
.xlanb-w .xw-table th{background:var(--jp-layout-color2,#f6f8fa)}
.xlanb-w .xw-table th:empty{display:none}
.xlanb-w .xw-code{font-family:var(--jp-code-font-family,ui-monospace,Menlo,Consolas,monospace);font-size:12px;
  background:var(--jp-layout-color2,#f6f8fa);padding:6px 8px;margin:2px 0;max-height:440px;overflow:auto;
  white-space:pre;border-radius:4px}
.xlanb-w .xw-opt{font-size:11px;color:var(--jp-content-font-color2,#57606a)}
.xlanb-w .xw-svg{max-height:500px;overflow:auto;border:1px solid var(--jp-border-color2,#d0d7de);border-radius:4px;
  background:#fff;padding:4px}
.xlanb-w .h-comment,.xlanb-w .h-meta{color:#8c959f}.xlanb-w .h-string{color:#0a3069}.xlanb-w .h-name{color:#953800}
.xlanb-w .h-type{color:#116329}.xlanb-w .h-keyword{color:#cf222e;font-weight:600}.xlanb-w .h-op{color:#8250df}
.xlanb-w .h-number{color:#0550ae}
"""

ESM = _ESM.replace("__PATTERN__", json.dumps(PATTERN)).replace("__CLASSES__", json.dumps(CLASSES))
