/**
 * The cell report as DOM: the summary line, notes (recompiles, forced executions, CPU
 * fallbacks, errors, pending IR), a table of graphs, and one collapsible section per graph with
 * its IR, DAG, StableHLO, optimized HLO and cost analysis; the same facts as the HTML fallback
 * (xlanb/report/html.py). Pure DOM, no JupyterLab module: the MIME renderer (mime.ts) and the
 * report widget (widget.ts, bundled into the Python package) both draw the report with it.
 */

import { devicesSection, IDevices } from './devices';
import {
  codeBox,
  formatBytes,
  formatCallMs,
  formatError,
  formatMs,
  h,
  kvTable,
  plural,
  svgBox,
  table,
  tabs,
  tensorsText
} from './dom';
import { failureLine, fusionsTable, irPanel, linkFusions, memorySection, modulesPanel } from './insight';
import { ICompare, IGraph, IPending, IReason, IReplay, IReport, ITorchCompile, isSupported } from './types';

export interface IRenderOptions {
  /** Output produced in this session; untrusted SVG is shown through <img>. */
  trusted: boolean;
}

function whereText(g: { where: { text: string } | null }): string {
  return g.where ? ` at ${g.where.text}` : '';
}

export function pendingText(p: IPending): string {
  const held = p.tensors
    .slice(0, 8)
    .map(t => `${t.name} (${t.type})`)
    .join(', ');
  const more = p.tensors.length > 8 ? `, ... (${p.tensors.length} named)` : '';
  const unnamed = p.unnamed ? `${held ? '; ' : ''}${p.unnamed} unnamed` : '';
  return `${plural(p.nodes, 'node')} left behind, held by ${held}${more}${unnamed} (xlanb.sync() or a value access computes it)`;
}

function notes(r: IReport): HTMLElement | null {
  const ul = h('ul', { class: 'xl-notes' });
  const add = (kind: string, label: string, text: string) =>
    ul.append(h('li', { class: `xl-note-${kind}` }, h('span', { class: `xl-tag xl-${kind}`, text: label }), text));
  for (const g of r.graphs) {
    if (g.recompile) {
      add('recompile', 'recompiled', `graph ${g.name}: ${g.recompile.text}`);
    }
  }
  for (const f of r.forced) {
    const src = f.where && f.where.source ? `: ${f.where.source}` : '';
    const n = f.count > 1 ? ` (x${f.count})` : '';
    const violation = f.kind === 'violation';
    add(
      violation ? 'error' : 'forced',
      violation ? 'violation' : 'forced',
      `${f.cause} in graph ${f.graph}${whereText(f)}${src}${n}`
    );
  }
  for (const f of r.fallbacks) {
    const g = f.graphs.length ? ` in graph ${f.graphs.join(', ')}` : '';
    const n = f.count > 1 ? `, ran ${f.count}x` : '';
    add('fallback', 'CPU fallback', `${f.op} (${f.reason})${g}${whereText(f)}${n}`);
  }
  for (const e of r.errors) {
    if (!e.startsWith('Unexpected execution')) {
      add('error', 'error', e); // violations are listed above
    }
  }
  if (r.pending) {
    if (r.pending.failure) {
      add('error', 'failed', r.pending.failure.text);
    }
    add('pending', 'pending', pendingText(r.pending));
  }
  for (const w of r.memory ? r.memory.warnings : []) {
    add('error', 'memory', w);
  }
  return ul.children.length ? ul : null;
}

function graphTable(r: IReport): HTMLElement | null {
  if (!r.graphs.length && !r.cached.length) {
    return null;
  }
  const rows: (Node | string | number)[][] = r.graphs.map(g => [
    h('b', { text: g.name }),
    h('code', { text: g.key.slice(0, 8) }),
    g.nodes,
    h('code', { text: tensorsText(g.inputs) + (g.scalars ? ` + ${plural(g.scalars, 'scalar')}` : '') }),
    h('code', { text: tensorsText(g.outputs) }),
    formatMs(g.lower_ms),
    formatMs(g.compile_ms) + (g.persistent_hit ? ' (disk)' : ''),
    g.executions,
    formatMs(g.execute_ms),
    g.where ? g.where.text : ''
  ]);
  for (const c of r.cached) {
    rows.push([
      h('b', { text: c.name }),
      h('code', { text: c.key.slice(0, 8) }),
      h('span', { class: 'xl-muted', text: 'cache hit' }),
      '',
      '',
      '',
      '',
      c.executions,
      formatMs(c.execute_ms),
      ''
    ]);
  }
  const t = table(
    ['graph', 'key', 'ops', 'inputs', 'outputs', 'lower', 'compile', 'runs', 'execute', 'where'],
    rows,
    [2, 5, 6, 7, 8]
  );
  t.classList.add('xl-graphs');
  return t;
}

/**
 * The tabs of one graph: overview, IR, DAG, StableHLO, optimized HLO, cost. `compact` (the
 * sidebar) keeps IR, StableHLO, optimized HLO and DAG, with short labels.
 */
export function graphTabs(g: IGraph, opts: IRenderOptions, initial = 0, compact = false): HTMLElement {
  const items: [string, () => HTMLElement][] = [];
  const overview: [string, () => HTMLElement] = [
    'Overview',
    () => {
      const rows: [string, string][] = [['cause', g.cause + whereText(g)]];
      if (g.where && g.where.source) {
        rows.push(['line', g.where.source]);
      }
      rows.push(['inputs', tensorsText(g.inputs) + (g.scalars ? ` + ${plural(g.scalars, 'scalar')}` : '')]);
      rows.push(['outputs', tensorsText(g.outputs)]);
      rows.push([
        'compile',
        `lower ${formatMs(g.lower_ms)}, compile ${formatMs(g.compile_ms)}${g.persistent_hit ? ' (disk cache)' : ''}` +
          (g.compile_effort === 'fast' ? ', compile effort: fast (XLA optimized less)' : '')
      ]);
      rows.push(['matmul precision', precisionText(g.matmul_precision)]);
      rows.push(['execute', `${g.executions}x, ${formatMs(g.execute_ms)}`]);
      if (g.recompile) {
        rows.push(['why it recompiled', `${g.recompile.text} (against graph ${g.recompile.against.slice(0, 8)})`]);
      }
      if (g.fallback_ops.length) {
        rows.push(['CPU fallback ops', g.fallback_ops.join(', ')]);
      }
      return kvTable(rows);
    }
  ];
  if (!compact) {
    items.push(overview);
  }
  items.push([compact ? 'IR' : `IR (${g.ir.nodes})`, () => irPanel(g.ir)]);
  let dagTab: [string, () => HTMLElement] | null = null;
  if (g.dag) {
    const dag = g.dag;
    const note =
      dag.collapsed === 'groups'
        ? 'chains and single-use inputs grouped'
        : dag.collapsed === 'layers'
          ? 'collapsed to one box per layer'
          : '';
    dagTab = [
      'DAG',
      () => h('div', {}, note ? h('div', { class: 'xl-muted', text: note }) : null, svgBox(dag.svg, opts.trusted))
    ];
    if (!compact) {
      items.push(dagTab);
    }
  }
  const modules = g.modules;
  if (modules && !compact) {
    items.push([`Modules (${modules.groups.length})`, () => modulesPanel(modules, opts.trusted)]);
  }
  const fusions = g.fusions || [];
  let openFusion: (name: string) => void = () => undefined;
  const stages: [string, 'stablehlo' | 'optimized'][] = [
    ['StableHLO', 'stablehlo'],
    [compact ? 'Optimized' : 'Optimized HLO', 'optimized']
  ];
  for (const [title, key] of stages) {
    const stage = g.hlo ? g.hlo[key] : null;
    if (stage) {
      items.push([
        title,
        () => {
          const box = codeBox(stage.text, {
            hideMeta: key === 'optimized',
            note: `${plural(stage.lines, 'line')}${stage.truncated ? ', truncated' : ''}`
          });
          if (key === 'optimized' && fusions.length) {
            linkFusions(box, fusions, name => openFusion(name));
          }
          return box;
        }
      ]);
    }
  }
  if (compact) {
    if (dagTab) {
      items.push(dagTab);
    }
    return tabs(items, initial);
  }
  if (fusions.length) {
    items.push([`Fusions (${fusions.length})`, () => fusionsTable(fusions)]);
  }
  if (g.cost || g.memory) {
    items.push([
      'Cost',
      () => {
        const box = h('div', { class: 'xl-cost' });
        if (g.cost) {
          box.append(
            h('b', { text: 'cost analysis' }),
            kvTable(
              Object.entries(g.cost).map(([k, v]) => [
                k,
                k.includes('bytes') ? formatBytes(v) : Number(v).toLocaleString()
              ])
            )
          );
        }
        if (g.memory) {
          box.append(
            h('b', { text: 'memory analysis' }),
            kvTable(Object.entries(g.memory).map(([k, v]) => [k, formatBytes(v)]))
          );
        }
        return box;
      }
    ]);
  }
  const box = tabs(items, initial);
  // a fusion's name in the optimized HLO opens the Fusions tab at its row
  openFusion = (name: string) => {
    const tab = Array.from(box.querySelectorAll('.xl-tab')).find(b => (b.textContent || '').startsWith('Fusions'));
    (tab as HTMLElement | undefined)?.click();
    const row = box.querySelector(`tr[data-fusion="${CSS.escape(name)}"]`);
    if (row) {
      box.querySelectorAll('tr.xl-hit').forEach(x => x.classList.remove('xl-hit'));
      row.classList.add('xl-hit');
      row.scrollIntoView({ block: 'nearest' });
    }
  };
  return box;
}

function graphSection(g: IGraph, r: IReport, opts: IRenderOptions): HTMLElement {
  const d = h('details', { class: 'xl-graph', 'data-graph': g.name });
  const summary = h(
    'summary',
    {},
    h('span', { class: 'xl-gname', text: g.name }),
    ' ',
    h('code', { class: 'xl-key', text: `[${g.key.slice(0, 8)}]` }),
    h(
      'span',
      { class: 'xl-muted' },
      ` ${plural(g.nodes, 'op')} \u00b7 compile ${formatMs(g.lower_ms + g.compile_ms)}` +
        `${g.persistent_hit ? ' (disk cache)' : ''}` +
        `${g.matmul_precision && g.matmul_precision !== 'highest' ? ` \u00b7 matmul precision: ${g.matmul_precision}` : ''}` +
        `${g.compile_effort && g.compile_effort !== 'default' ? ` \u00b7 compile effort: ${g.compile_effort}` : ''}` +
        ` \u00b7 ran ${g.executions}x`
    ),
    g.recompile ? h('span', { class: 'xl-tag xl-recompile xl-small', text: 'recompiled' }) : null
  );
  d.append(summary);
  // built on first open: big reports stay cheap until someone looks
  let body: HTMLElement | null = null;
  d.addEventListener('toggle', () => {
    if ((d as HTMLDetailsElement).open && !body) {
      body = graphTabs(g, opts, r.cell.style === 'full' ? 1 : 0);
      d.append(body);
    }
  });
  return d;
}

function eagerSection(r: IReport): HTMLElement | null {
  const e = r.eager;
  if (!e || (!e.compiles && !e.executions)) {
    return null;
  }
  const d = h(
    'details',
    { class: 'xl-eager' },
    h(
      'summary',
      {},
      `eager ops: ${e.compiles} compiled (${formatMs(e.compile_ms)}), ${e.executions} run (${formatMs(e.execute_ms)})`
    )
  );
  if (e.ops.length) {
    d.append(
      table(
        ['op', 'signature', 'compiles', 'compile'],
        e.ops.map(o => [h('code', { text: o.op }), h('code', { text: o.signature }), o.compiles, formatMs(o.compile_ms)]),
        [2, 3]
      )
    );
  }
  return d;
}

function pendingSection(p: IPending, opts: IRenderOptions): HTMLElement {
  const failure = p.failure;
  const title = failure ? 'partial graph of the failed cell' : 'pending IR';
  const d = h(
    'details',
    { class: 'xl-pending-ir', open: !!failure },
    h('summary', {}, `${title} (${plural(p.nodes, 'node')})`)
  );
  if (failure) {
    d.append(failureLine(failure));
  }
  const items: [string, () => HTMLElement][] = [['IR', () => irPanel(p.ir, failure ? failure.highlight : [])]];
  if (p.dag) {
    const svg = p.dag.svg;
    items.push(['DAG', () => svgBox(svg, opts.trusted)]);
  }
  const modules = p.modules;
  if (modules) {
    items.push(['Modules', () => modulesPanel(modules, opts.trusted)]);
  }
  d.append(tabs(items));
  return d;
}

/**
 * What torch.compile(backend="xlanb") did: the FX graphs captured (and their path), graph breaks
 * with reason and user line, re-captures with the failed guard; the same lines as
 * TorchCompile.lines() (xlanb/report/model.py). Open when something broke or was captured again.
 */
export function torchCompileSection(tc: ITorchCompile): HTMLElement {
  const graphs = tc.graphs || [];
  const breaks = tc.breaks || [];
  const recaptures = tc.recaptures || [];
  const d = h(
    'details',
    { class: 'xl-torch-compile', open: !!(breaks.length || recaptures.length) },
    h(
      'summary',
      {},
      `torch.compile (${plural(graphs.length, 'FX graph')} captured, ${plural(breaks.length, 'graph break')})`
    )
  );
  const ul = h('ul', { class: 'xl-notes xl-tc-list' });
  const add = (cls: string, kind: string, label: string, text: string) =>
    ul.append(h('li', { class: cls }, h('span', { class: `xl-tag xl-${kind}`, text: label }), text));
  for (const g of graphs) {
    const how = g.path === 'macro' ? 'one lazy node per call' : `replayed op by op: ${g.reason}`;
    const at = g.location ? ` at ${g.location}` : '';
    add(
      `xl-tc-graph xl-tc-${g.path}`,
      g.path === 'macro' ? 'fx' : 'fallback',
      g.kind,
      `torch.compile captured ${g.kind} graph ${g.name}: ${g.ops} ops, ${g.inputs} inputs${at}; ${how}`
    );
  }
  for (const b of breaks) {
    add(
      'xl-tc-break',
      'forced',
      'graph break',
      `torch.compile graph break at ${b.location || 'an unknown line'}: ${b.reason}`
    );
  }
  for (const c of recaptures) {
    const at = c.location ? ` (${c.location})` : '';
    add('xl-tc-recapture', 'recompile', 'captured again', `torch.compile captured again${at}: guard failed: ${c.reason}`);
  }
  if (!ul.children.length) {
    for (const line of tc.lines || []) {
      ul.append(h('li', { text: line }));
    }
  }
  d.append(ul);
  return d;
}

/** `replay: 8 calls replayed, 1 call traced instead, 1 function not replayable` (report/text.py's replay_summary). */
export function replaySummary(rp: IReplay): string {
  const fs = rp.functions || [];
  const parts = [`${plural(fs.reduce((n, f) => n + f.calls, 0), 'call')} replayed`];
  const failed = fs.reduce((n, f) => n + (f.misses || []).reduce((m, r) => m + r.count, 0), 0);
  if (failed) {
    parts.push(`${plural(failed, 'call')} traced instead`);
  }
  const never = fs.filter(f => (f.not_replayable || []).length).length;
  if (never) {
    parts.push(`${plural(never, 'function')} not replayable`);
  }
  return `replay: ${parts.join(', ')}`;
}

/**
 * Step replay (xlanb.compile(fn, replay=True)): a row per function with its replayed calls, host
 * time per call and executable, then each guard failure and not-replayable reason once with its
 * count; the same facts as ReplayedFunction.lines() (xlanb/report/model.py). Open when a call
 * traced instead or a function cannot be replayed.
 */
export function replaySection(rp: IReplay): HTMLElement {
  const fs = rp.functions || [];
  const ul = h('ul', { class: 'xl-notes xl-replay-notes' });
  const add = (cls: string, kind: string, label: string, name: string, reasons: IReason[]) => {
    for (const r of reasons || []) {
      const n = r.count > 1 ? ` (x${r.count})` : '';
      const tag = h('span', { class: `xl-tag xl-${kind}`, text: label });
      ul.append(h('li', { class: cls }, tag, `${name}: ${r.reason}${n}`));
    }
  };
  for (const f of fs) {
    add('xl-replay-miss', 'recompile', 'traced instead', f.name, f.misses);
    add('xl-replay-never', 'forced', 'not replayable', f.name, f.not_replayable);
  }
  const d = h(
    'details',
    { class: 'xl-replay', open: ul.children.length > 0 },
    h('summary', {}, replaySummary(rp))
  );
  const t = table(
    ['function', 'replayed calls', 'host per call', 'executable'],
    fs.map(f => [
      h('b', { text: f.name }),
      f.calls,
      f.calls ? formatCallMs(f.per_call_us / 1000) : '',
      h('code', { text: (f.keys || []).map(k => k.slice(0, 8)).join(', ') })
    ]),
    [1, 2]
  );
  t.classList.add('xl-replay-table');
  d.append(t);
  if (ul.children.length) {
    d.append(ul);
  }
  return d;
}

/**
 * xlanb.compare(): per region, one line when its ops agreed; else the first divergence (open) with
 * the rows around it, so the reader sees how the error grows, and the hint; the same facts as
 * CompareRegion.lines() (xlanb/report/model.py).
 */
export function compareSections(c: ICompare): HTMLElement[] {
  return (c.regions || []).map(region => {
    if (!region.first) {
      return h('p', { class: 'xl-compare-ok', text: region.text });
    }
    const first = region.first.index;
    const d = h('details', { class: 'xl-compare', open: true }, h('summary', {}, region.text));
    if (region.detail) {
      d.append(h('p', { class: 'xl-compare-detail', text: region.detail }));
    }
    const t = table(
      ['#', 'op', 'location', 'module', 'phase', 'status', 'max abs', 'max rel'],
      region.rows.map(row => [
        row.index,
        h('code', { text: row.op }),
        row.location,
        row.module,
        row.phase,
        row.status,
        formatError(row.max_abs),
        formatError(row.max_rel)
      ]),
      [0, 6, 7]
    );
    t.classList.add('xl-compare-table');
    const trs = t.querySelectorAll('tr');
    region.rows.forEach((row, i) => trs[i + 1].classList.toggle('xl-first', row.index === first));
    d.append(t);
    if (region.hint) {
      d.append(h('p', { class: 'xl-compare-hint' }, h('b', { text: 'hint:' }), ` ${region.hint}`));
    }
    return d;
  });
}

function timelineSection(r: IReport, opts: IRenderOptions): HTMLElement | null {
  if (!r.timeline || !r.timeline.spans.length) {
    return null;
  }
  const more = r.timeline.omitted ? ` (${r.timeline.omitted} short spans not drawn)` : '';
  return h(
    'details',
    { class: 'xl-timeline' },
    h('summary', {}, `timeline${more}`),
    svgBox(r.timeline.svg, opts.trusted)
  );
}

/** The report as one element. A report of another major version shows its text. */
export function renderReport(r: unknown, opts: IRenderOptions): HTMLElement {
  const root = h('div', { class: 'xlanb-lab-report' });
  if (!isSupported(r)) {
    const v = (r as { version?: string } | null)?.version;
    const text = (r as { text?: string } | null)?.text;
    root.append(h('pre', { class: 'xl-plain', text: text || `xlanb: report version ${v} is not supported` }));
    return root;
  }
  const n = notes(r);
  const named = r.graphs.some(g => !g.eager);
  // a replay guard failed, or a function cannot be replayed: open, like a recompile
  const missed = (r.replay?.functions || []).some(f => (f.misses || []).length || (f.not_replayable || []).length);
  // an op's outputs differ from its CPU twin's: open too
  const diverged = (r.compare?.regions || []).some(c => !c.ok);
  const top = h('details', {
    class: 'xl-top',
    open: !!n || named || missed || diverged || r.cell.style === 'full'
  });
  top.append(
    h(
      'summary',
      {},
      h('span', { class: 'xl-brand', text: 'xlanb' }),
      h('span', { class: `xl-mode xl-mode-${r.cell.mode}`, text: r.cell.mode }),
      h('span', { class: 'xl-summary', text: r.summary.text.replace(/^xlanb \[\w+\]: /, '') })
    )
  );
  if (n) {
    top.append(n);
  }
  const gt = graphTable(r);
  if (gt) {
    top.append(h('div', { class: 'xl-scrollx' }, gt));
  }
  if (r.replay) {
    top.append(replaySection(r.replay));
  }
  if (r.compare) {
    top.append(...compareSections(r.compare));
  }
  if (r.cell.style !== 'compact') {
    for (const g of r.graphs) {
      top.append(graphSection(g, r, opts));
    }
    if (r.torch_compile) {
      top.append(torchCompileSection(r.torch_compile));
    }
    const e = eagerSection(r);
    if (e) {
      top.append(e);
    }
    if (r.pending) {
      top.append(pendingSection(r.pending, opts));
    }
    if (r.memory) {
      top.append(memorySection(r.memory));
    }
    const dv = devicesSection((r as { devices?: IDevices | null }).devices, opts.trusted);
    if (dv) {
      top.append(dv);
    }
    const t = timelineSection(r, opts);
    if (t) {
      top.append(t);
    }
  }
  root.append(top);
  return root;
}

/** torch's float32 matmul precision and the XLA dot precision it maps to. */
function precisionText(p: string | undefined): string {
  const xla: Record<string, string> = { highest: 'HIGHEST', high: 'HIGH', medium: 'DEFAULT' };
  const name = p ?? 'highest';
  return `${name} (XLA ${xla[name] ?? name})`;
}
