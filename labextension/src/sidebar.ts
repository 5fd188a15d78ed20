/**
 * The "XLA" sidebar: what the current notebook's kernel has compiled so far. Graphs (name, key,
 * compile count, compile and execute time, last recompile reason; click one for its IR, HLO and
 * DAG), the cache (size, hit rate), eager ops and CPU fallbacks.
 */

import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { formatMs, h, plural } from './dom';
import { XlaModel } from './model';
import { graphTabs } from './report';
import { IGraphEntry, KernelXlaState } from './store';

export const SIDEBAR_ID = 'xlanb-sidebar';

export const xlaIcon = new LabIcon({
  name: 'xlanb:xla',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<g class="jp-icon3" fill="#616161">' +
    '<path d="M3 4h18v2H3zM3 18h18v2H3z"/>' +
    '<text x="12" y="15.5" font-family="sans-serif" font-size="8.5" font-weight="700" text-anchor="middle">XLA</text>' +
    '</g></svg>'
});

export class XlaSidebar extends Widget {
  private open = new Set<string>(); // graph names whose details are shown
  private tab = new Map<string, number>(); // the tab last picked per graph

  constructor(
    private readonly model: XlaModel,
    private readonly openGraph: (g: IGraphEntry) => void
  ) {
    super();
    this.id = SIDEBAR_ID;
    this.addClass('xlanb-sidebar');
    this.title.icon = xlaIcon;
    this.title.caption = 'XLA: graphs compiled by this kernel';
    model.changed.connect(() => this.update(), this);
    this.update();
  }

  protected onUpdateRequest(): void {
    this.render();
  }

  protected onAfterShow(): void {
    this.render();
  }

  private render(): void {
    if (!this.isVisible && this.node.childElementCount) {
      return; // drawn again when shown
    }
    const panel = this.model.panel;
    const state = this.model.current;
    const head = h('div', { class: 'xl-sb-head' }, h('h2', { text: 'XLA' }));
    if (panel) {
      const kernel = panel.sessionContext.kernelDisplayName;
      head.append(h('div', { class: 'xl-muted xl-sb-kernel', text: `${panel.context.localPath} \u00b7 ${kernel}` }));
    }
    const body: (HTMLElement | null)[] = [head];
    if (!panel) {
      body.push(h('p', { class: 'xl-muted', text: 'Open a notebook to see what its kernel compiles.' }));
    } else if (!state) {
      body.push(h('p', { class: 'xl-muted', text: 'The notebook has no kernel running.' }));
    } else {
      body.push(...this.sections(state));
    }
    this.node.replaceChildren(...body.filter((x): x is HTMLElement => x !== null));
  }

  private sections(s: KernelXlaState): (HTMLElement | null)[] {
    const out: (HTMLElement | null)[] = [];
    if (s.notice) {
      out.push(h('div', { class: 'xl-sb-notice', role: 'status', text: s.notice }));
    }
    if (s.compiling) {
      out.push(h('div', { class: 'xl-sb-running', text: `running %%xla_compile: graph ${s.compiling}` }));
    }
    if (!s.reports) {
      const hint =
        s.mode === null
          ? 'No xlanb report from this kernel yet. Run %load_ext xlanb, then a cell that uses the xla device.'
          : 'No graph compiled yet in this kernel.';
      out.push(h('p', { class: 'xl-muted xl-sb-empty', text: hint }));
      return out;
    }
    const rate = s.hitRate;
    out.push(
      h(
        'dl',
        { class: 'xl-sb-facts' },
        h('dt', { text: 'mode' }),
        h('dd', { class: 'xl-sb-mode', text: s.mode ?? '?' }),
        h('dt', { text: 'pending' }),
        h('dd', { text: s.pending === null ? '?' : plural(s.pending, 'op') }),
        h('dt', { text: 'cache' }),
        h('dd', {
          class: 'xl-sb-cache',
          title:
            s.cacheSize === null
              ? 'executables compiled in this kernel (graphs and eager ops); the LRU may have evicted some'
              : 'executables in the in-memory cache',
          text: plural(s.executables, 'executable')
        }),
        h('dt', { text: 'hit rate' }),
        h('dd', {
          class: 'xl-sb-hitrate',
          text:
            (rate === null ? '-' : `${Math.round(rate * 100)}%`) +
            ` (${plural(s.cacheHits, 'hit')}, ${plural(s.cacheMisses, 'miss')})` +
            (s.persistentHits ? `; ${s.persistentHits} from the disk cache` : '')
        }),
        h('dt', { text: 'time' }),
        h('dd', { text: `compile ${formatMs(s.compileMs)} \u00b7 execute ${formatMs(s.executeMs)}` }),
        h('dt', { text: 'cells' }),
        h('dd', { text: `${s.reports} reported` })
      )
    );
    if (s.mesh) {
      out.push(meshSection(s.mesh));
    }
    const graphs = [...s.graphs.values()].filter(g => !g.eager);
    out.push(h('h3', { text: `Graphs (${graphs.length})` }));
    if (graphs.length) {
      const list = h('ul', { class: 'xl-sb-graphs' });
      for (const g of graphs) {
        list.append(this.graphItem(g));
      }
      out.push(list);
    } else {
      out.push(h('p', { class: 'xl-muted', text: 'No named or lazy graph yet (eager ops only).' }));
    }
    if (s.eagerCompiles || s.eagerExecutions) {
      out.push(
        h('h3', { text: 'Eager ops' }),
        h('p', { class: 'xl-sb-eager', text: `${s.eagerCompiles} compiled, ${s.eagerExecutions} run` })
      );
    }
    out.push(h('h3', { text: `CPU fallbacks (${s.fallbacks.size})` }));
    if (s.fallbacks.size) {
      const ul = h('ul', { class: 'xl-sb-fallbacks' });
      for (const f of s.fallbacks.values()) {
        const where = f.where ? ` at ${f.where}` : '';
        const graphsText = f.graphs.length ? ` in ${f.graphs.join(', ')}` : '';
        ul.append(h('li', {}, h('code', { text: f.op }), ` ${f.reason}, ran ${f.count}x${graphsText}${where}`));
      }
      out.push(ul);
    } else {
      out.push(h('p', { class: 'xl-muted', text: 'none: every op ran on the XLA device' }));
    }
    return out;
  }

  private graphItem(g: IGraphEntry): HTMLElement {
    const isOpen = this.open.has(g.name);
    const head = h(
      'button',
      { class: 'xl-sb-ghead', 'aria-expanded': String(isOpen), title: 'Show the IR and HLO of the latest compile' },
      h('span', { class: 'xl-sb-caret', text: isOpen ? '\u25be' : '\u25b8' }),
      h('span', { class: 'xl-sb-gname', text: g.name }),
      h('code', { class: 'xl-key', text: g.key.slice(0, 8) }),
      h('span', { class: 'xl-sb-compiles', text: plural(g.compiles, 'compile') })
    );
    const stats = h('div', {
      class: 'xl-sb-gstats xl-muted',
      text:
        `compile ${formatMs(g.compileMs)} \u00b7 execute ${formatMs(g.executeMs)} (${g.executions}x)` +
        (g.keys.length > 1 ? ` \u00b7 ${g.keys.length} keys` : '')
    });
    const li = h('li', { class: 'xl-sb-graph', 'data-graph': g.name }, head, stats);
    if (g.lastRecompile) {
      li.append(
        h('div', { class: 'xl-sb-recompile' }, h('span', { class: 'xl-tag xl-recompile xl-small', text: 'recompiled' }), g.lastRecompile)
      );
    }
    if (isOpen) {
      const tabs = graphTabs(g.latest, { trusted: true }, this.tab.get(g.name) ?? 0, true);
      tabs.addEventListener('click', e => {
        const b = (e.target as HTMLElement).closest('.xl-tab');
        if (b && b.parentElement) {
          this.tab.set(g.name, [...b.parentElement.children].indexOf(b));
        }
      });
      const open = h('button', {
        class: 'xl-sb-open',
        title: 'Open the IR, HLO and DAG of this graph in the main area',
        text: 'open in a tab'
      });
      open.addEventListener('click', () => this.openGraph(g));
      li.append(h('div', { class: 'xl-sb-detail' }, open, tabs));
    }
    head.addEventListener('click', () => {
      if (this.open.has(g.name)) {
        this.open.delete(g.name);
      } else {
        this.open.add(g.name);
      }
      this.render();
    });
    return li;
  }
}

/** The mesh of the last partitioned graph: its axes, and its devices laid out as a grid. */
function meshSection(mesh: { text: string; devices: number; graph: string }): HTMLElement {
  const sizes = [...mesh.text.matchAll(/(\w+)=(\d+)/g)].map(m => Number(m[2]));
  const cols = sizes.length ? sizes[sizes.length - 1] : mesh.devices;
  const grid = h('table', { class: 'xl-table xl-sb-mesh' });
  for (let r = 0; r * cols < mesh.devices; r++) {
    const row = h('tr', {});
    for (let c = 0; c < cols && r * cols + c < mesh.devices; c++) {
      row.append(h('td', { text: String(r * cols + c) }));
    }
    grid.append(row);
  }
  return h(
    'div',
    { class: 'xl-sb-meshbox' },
    h('h3', { text: 'Mesh' }),
    h('p', { class: 'xl-muted', text: `${mesh.text} \u00b7 ${plural(mesh.devices, 'device')} (graph ${mesh.graph})` }),
    grid
  );
}
