/**
 * The report's schema-1.2 sections as DOM: ops by module (the DAG collapsed to one box per module;
 * a click on a box, or on its chip, expands it into the DAG of its ops), the IR filtered by module,
 * fusions traced to ATen ops / modules / cell lines (linked from the optimized HLO; XLA's cost of
 * each since 1.4), device memory by variable, and the failure behind a partial graph.
 * xlanb/report/insight.py writes the same facts as HTML and text.
 */

import { codeBox, formatBytes, formatFlops, h, plural, svgBox, table } from './dom';
import { IFailure, IFusion, IIrLine, IMemory, IModules } from './types';

/** A module view: groups table, module DAG, and the expanded DAG of the chosen module. */
export function modulesPanel(m: IModules, trusted: boolean): HTMLElement {
  const box = h('div', { class: 'xl-modules' });
  const expanded = h('div', { class: 'xl-module-expanded' });
  const chips = h('div', { class: 'xl-module-chips' });
  let current = '';
  const show = (key: string) => {
    const dag = m.expanded[key];
    for (const c of Array.from(chips.children)) {
      c.classList.toggle('xl-active', (c as HTMLElement).dataset.module === key && current !== key);
    }
    if (!dag || current === key) {
      current = '';
      expanded.replaceChildren();
      return;
    }
    current = key;
    const close = h('button', { class: 'xl-copy', text: 'collapse' });
    close.addEventListener('click', () => show(key));
    expanded.replaceChildren(
      h(
        'div',
        { class: 'xl-module-head' },
        h('b', { text: key }),
        ` \u00b7 ${plural(dag.nodes, 'op')} `,
        close
      ),
      svgBox(dag.svg, trusted)
    );
  };
  for (const key of Object.keys(m.expanded)) {
    const ops = m.expanded[key].nodes;
    const chip = h('button', { class: 'xl-chip', 'data-module': key, text: `${key} \u00b7 ${ops}` });
    chip.addEventListener('click', () => show(key));
    chips.append(chip);
  }
  if (m.dag) {
    const drawing = svgBox(m.dag.svg, trusted, 'xl-svg xl-module-dag');
    drawing.addEventListener('click', ev => {
      const g = (ev.target as Element).closest('[data-module]');
      if (g) {
        show(g.getAttribute('data-module') || '');
      }
    });
    box.append(
      h('div', { class: 'xl-muted', text: 'one box per module; click a box (or a name) to expand it' }),
      chips,
      drawing,
      expanded
    );
  }
  box.append(
    table(
      ['module', 'own ops', 'with submodules', 'most common'],
      m.groups.map(g => [h('code', { text: g.path }), g.ops, g.total, h('code', { text: g.top })]),
      [1, 2]
    )
  );
  return box;
}

function irText(lines: IIrLine[], truncated: boolean, marks: Set<number>): string {
  const body = lines.map(l => (marks.has(l.index) ? '>> ' : '  ') + l.text);
  return ['IR {', ...body, ...(truncated ? ['  ...'] : []), '}'].join('\n');
}

/** The IR, with a module filter when its lines carry modules; lines in `marks` are highlighted. */
export function irPanel(
  ir: { text: string; truncated: boolean; lines?: unknown[] },
  marks: number[] = []
): HTMLElement {
  const lines = (ir.lines || []) as IIrLine[];
  const scopes = Array.from(
    new Set(lines.filter(l => !l.is_input && l.scope !== undefined && l.scope !== null).map(l => l.scope as string))
  );
  const note = ir.truncated ? 'truncated: %xla_report full shows every line' : '';
  const marked = new Set(marks);
  if (!scopes.length) {
    return marks.length
      ? codeBox(irText(lines, ir.truncated, marked), { note })
      : codeBox(ir.text, { note });
  }
  const wrap = h('div', { class: 'xl-ir' });
  const select = h('select', { class: 'xl-ir-filter', title: 'show the ops of one module' }) as HTMLSelectElement;
  select.append(h('option', { value: '*', text: 'all modules' }));
  for (const s of scopes.sort()) {
    select.append(h('option', { value: s, text: s || '<top>' }));
  }
  const holder = h('div', {});
  const draw = () => {
    const sel = select.value;
    const shown =
      sel === '*'
        ? lines
        : lines.filter(l => !l.is_input && typeof l.scope === 'string' && (l.scope === sel || l.scope.startsWith(sel + '.')));
    const text = sel === '*' && !marks.length ? ir.text : irText(shown, ir.truncated && sel === '*', marked);
    holder.replaceChildren(codeBox(text, { note: sel === '*' ? note : `${plural(shown.length, 'op')} in ${sel || '<top>'}` }));
  };
  select.addEventListener('change', draw);
  wrap.append(h('label', { class: 'xl-opt' }, 'module: ', select), holder);
  draw();
  return wrap;
}

/** The fusions table; `rowFor` finds a row by fusion name (the optimized HLO links to it). */
export function fusionsTable(fusions: IFusion[]): HTMLElement {
  const t = table(
    ['fusion', 'kind', 'ATen ops', 'modules', 'lines', 'writes', 'flops', 'bytes accessed'],
    fusions.map(f => [
      h('code', { text: f.name }),
      f.kind,
      h('code', { text: f.ops.join(', ') }),
      f.modules.join(', '),
      f.lines.join(', '),
      formatBytes(f.out_bytes),
      f.flops == null ? '' : formatFlops(f.flops),
      f.bytes_accessed == null ? '' : formatBytes(f.bytes_accessed)
    ]),
    [5, 6, 7]
  );
  t.classList.add('xl-fusions');
  Array.from(t.querySelectorAll('tr'))
    .slice(1)
    .forEach((tr, i) => tr.setAttribute('data-fusion', fusions[i].name));
  return t;
}

/**
 * Makes each fusion's name in an optimized HLO view a link: a click calls `open(name)`, and the
 * name's title says what the fusion came from.
 */
export function linkFusions(box: HTMLElement, fusions: IFusion[], open: (name: string) => void): void {
  const byName = new Map(fusions.map(f => [f.name, f]));
  const apply = () => {
    for (const span of Array.from(box.querySelectorAll('span.h-name'))) {
      const f = byName.get((span.textContent || '').replace(/^%/, ''));
      if (f) {
        span.classList.add('xl-fusion-link');
        span.setAttribute('data-fusion', f.name);
        span.setAttribute('title', f.text);
      }
    }
  };
  apply();
  box.addEventListener('click', ev => {
    const link = (ev.target as Element).closest('.xl-fusion-link');
    if (link) {
      open(link.getAttribute('data-fusion') || '');
    }
  });
  box.addEventListener('change', () => setTimeout(apply, 0)); // "hide metadata" redraws the text
}

function signed(n: number | null): string {
  if (n === null || n === undefined) {
    return 'new';
  }
  return n === 0 ? '=' : (n > 0 ? '+' : '-') + formatBytes(Math.abs(n));
}

export function memorySection(m: IMemory): HTMLElement {
  const d = h('details', { class: 'xl-memory' }, h('summary', {}, m.text));
  for (const w of m.warnings) {
    d.append(h('div', { class: 'xl-warning' }, h('span', { class: 'xl-tag xl-error', text: 'memory' }), w));
  }
  const rows: (Node | string | number)[][] = m.holders.map(x => [
    h('code', { text: x.name }),
    x.kind,
    x.tensors + (x.pending ? ` (${x.pending} pending)` : ''),
    formatBytes(x.bytes),
    signed(x.change)
  ]);
  if (m.others) {
    rows.push([h('span', { class: 'xl-muted', text: `${m.others} more` }), '', '', formatBytes(m.others_bytes), '']);
  }
  const t = table(['held by', 'kind', 'tensors', 'bytes', 'since previous cell'], rows, [2, 3, 4]);
  t.classList.add('xl-memory-table');
  d.append(t);
  const extra = [`${m.device}`, `all live buffers ${formatBytes(m.total)}`];
  if (m.capacity) {
    // on the CPU backend the device's memory is the host's
    extra.push(`${m.device.endsWith('(cpu)') ? 'host' : 'device'} memory ${formatBytes(m.capacity)}`);
  }
  if (m.stats && typeof m.stats.bytes_in_use === 'number') {
    extra.push(`memory_stats: ${formatBytes(m.stats.bytes_in_use)} in use`);
  }
  d.append(h('div', { class: 'xl-muted', text: extra.join(' \u00b7 ') }));
  return d;
}

export function failureLine(f: IFailure): HTMLElement {
  return h(
    'div',
    { class: 'xl-failure' },
    h('span', { class: 'xl-tag xl-error', text: 'failed' }),
    f.text,
    f.where && f.where.source ? h('code', { text: ` ${f.where.source}` }) : null
  );
}
