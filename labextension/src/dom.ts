/**
 * Small DOM helpers shared by the report renderer and the sidebar: element builder, number
 * formats (the same as xlanb/report/format.py), highlighted code boxes, tabs, and SVG boxes.
 */

import { highlight } from './highlight';
import { ITensor } from './types';

type Child = Node | string | null | undefined | false;

/** document.createElement with attributes, `text`, `on<event>` handlers and children. */
export function h(
  tag: string,
  attrs: Record<string, string | number | boolean | EventListener | undefined> = {},
  ...children: Child[]
): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) {
      continue;
    }
    if (k === 'text') {
      el.textContent = String(v);
    } else if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const c of children) {
    if (c !== null && c !== undefined && c !== false) {
      el.append(c);
    }
  }
  return el;
}

export function formatMs(ms: number): string {
  if (ms >= 1000) {
    return `${(ms / 1000).toFixed(2)} s`;
  }
  return ms >= 1 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(2)} ms`;
}

/** A short time per call, as report/format.py's format_call_ms: `66 µs` under 0.1 ms, else formatMs. */
export function formatCallMs(ms: number): string {
  return ms < 0.1 ? `${(ms * 1000).toFixed(0)} \u00b5s` : formatMs(ms);
}

/** An op's error against its CPU twin, as report/format.py's format_error: `0`, `0.031`, `1.00e-07`, `inf`. */
export function formatError(x: number | string): string {
  if (typeof x === 'string') {
    return x; // "inf", "nan": JSON has neither
  }
  if (x === 0) {
    return '0';
  }
  const r = Number(x.toPrecision(3));
  if (Math.abs(r) >= 1e-3 && Math.abs(r) < 1e3) {
    return String(r);
  }
  const [m, e] = x.toExponential(2).split('e');
  const n = Number(e);
  return `${m}e${n < 0 ? '-' : '+'}${String(Math.abs(n)).padStart(2, '0')}`;
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n.toFixed(0)} B` : `${n.toFixed(1)} ${units[i]}`;
}

/** `512 FLOP`, `32.8 kFLOP`, ... as report/format.py's format_flops. */
export function formatFlops(n: number): string {
  const units = ['FLOP', 'kFLOP', 'MFLOP', 'GFLOP', 'TFLOP'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return i === 0 ? `${n.toFixed(0)} FLOP` : `${Number(n.toPrecision(3))} ${units[i]}`;
}

export function plural(n: number, word: string): string {
  if (n === 1) {
    return `1 ${word}`;
  }
  return /(s|sh|ch|x)$/.test(word) ? `${n} ${word}es` : `${n} ${word}s`;
}

export function tensorsText(list: ITensor[] | undefined): string {
  if (!list || !list.length) {
    return '()';
  }
  const shown = list
    .slice(0, 6)
    .map(t => t.text)
    .join(', ');
  return list.length > 6 ? `${shown}, ... (${list.length} in all)` : shown;
}

const META = /,? ?metadata=\{[^\n]*?\}(?=,\s|\n|$)/g;

/** A highlighted <pre>; HLO with metadata={...} gets a "hide metadata" switch. */
export function codeBox(text: string, { hideMeta = false, note = '' } = {}): HTMLElement {
  const box = h('div', { class: 'xl-codebox' });
  const pre = h('pre', { class: 'xl-code' });
  const draw = (hide: boolean) => {
    pre.innerHTML = highlight(hide ? text.replace(META, '') : text);
  };
  const bar = h('div', { class: 'xl-codebar' });
  if (note) {
    bar.append(h('span', { class: 'xl-muted', text: note }));
  }
  const hasMeta = /metadata=\{/.test(text);
  if (hasMeta) {
    const cb = h('input', { type: 'checkbox' }) as HTMLInputElement;
    cb.checked = hideMeta;
    cb.addEventListener('change', () => draw(cb.checked));
    bar.append(h('label', { class: 'xl-opt' }, cb, ' hide metadata'));
  }
  const copy = h('button', {
    class: 'xl-copy',
    title: 'Copy to the clipboard',
    text: 'copy'
  });
  copy.addEventListener('click', () => {
    void navigator.clipboard?.writeText(text).then(
      () => (copy.textContent = 'copied'),
      () => (copy.textContent = 'copy failed')
    );
  });
  bar.append(copy);
  draw(hideMeta && hasMeta);
  box.append(bar, pre);
  return box;
}

/**
 * An SVG drawn by xlanb (DAG, timeline). Trusted output is inlined (node tooltips work);
 * untrusted output goes through an <img>, where an SVG can run no script.
 */
export function svgBox(svg: string, trusted: boolean, cls = 'xl-svg'): HTMLElement {
  const box = h('div', { class: cls });
  if (trusted) {
    box.innerHTML = svg;
  } else {
    box.append(
      h('img', {
        src: 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(svg),
        alt: 'graph drawing'
      })
    );
  }
  return box;
}

/** Tabs whose panels are built the first time they are shown. */
export function tabs(items: [string, () => HTMLElement][], initial = 0): HTMLElement {
  const bar = h('div', { class: 'xl-tabs', role: 'tablist' });
  const body = h('div', { class: 'xl-tabpanel', role: 'tabpanel' });
  const built = new Map<number, HTMLElement>();
  const buttons = items.map(([label], i) => {
    const b = h('button', { class: 'xl-tab', role: 'tab', text: label });
    b.addEventListener('click', () => show(i));
    bar.append(b);
    return b;
  });
  function show(i: number): void {
    buttons.forEach((b, j) => {
      b.classList.toggle('xl-active', i === j);
      b.setAttribute('aria-selected', String(i === j));
    });
    if (!built.has(i)) {
      built.set(i, items[i][1]());
    }
    body.replaceChildren(built.get(i) as HTMLElement);
  }
  if (items.length) {
    show(Math.min(initial, items.length - 1));
  }
  return h('div', { class: 'xl-tabbox' }, bar, body);
}

/** A two-column key/value table. */
export function kvTable(rows: [string, Node | string][]): HTMLElement {
  const t = h('table', { class: 'xl-table xl-kv' });
  for (const [k, v] of rows) {
    t.append(h('tr', {}, h('th', { text: k }), h('td', {}, v)));
  }
  return t;
}

/** A table with a header row; a cell is text or a node; `num` marks right-aligned columns. */
export function table(head: string[], rows: (Node | string | number)[][], num: number[] = []): HTMLElement {
  const t = h('table', { class: 'xl-table' });
  t.append(h('tr', {}, ...head.map(x => h('th', { text: x }))));
  for (const r of rows) {
    t.append(
      h(
        'tr',
        {},
        ...r.map((x, i) =>
          h('td', { class: num.includes(i) ? 'xl-num' : undefined }, x instanceof Node ? x : String(x))
        )
      )
    );
  }
  return t;
}
