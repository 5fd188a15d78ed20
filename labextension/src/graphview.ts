/**
 * One graph in the main area (opened from the sidebar): where and why it compiled, and the
 * tabs of its latest compile, with room for long HLO.
 */

import { Widget } from '@lumino/widgets';

import { formatMs, h, plural } from './dom';
import { graphTabs } from './report';
import { IGraphEntry } from './store';

export class GraphView extends Widget {
  constructor(entry: IGraphEntry) {
    super();
    this.addClass('xlanb-graph-view');
    const g = entry.latest;
    this.node.append(
      h(
        'div',
        { class: 'xl-gv-head' },
        h('span', { class: 'xl-gname', text: g.name }),
        ' ',
        h('code', { class: 'xl-key', text: g.key }),
        h(
          'div',
          { class: 'xl-muted' },
          `${plural(entry.compiles, 'compile')} in this kernel (compile ${formatMs(entry.compileMs)}, ` +
            `execute ${formatMs(entry.executeMs)}, ${entry.executions}x)` +
            (entry.lastCell !== null ? ` \u00b7 latest in In [${entry.lastCell}]` : '') +
            (entry.lastRecompile ? ` \u00b7 last recompile: ${entry.lastRecompile}` : '')
        )
      ),
      graphTabs(g, { trusted: true }, 1)
    );
  }
}
