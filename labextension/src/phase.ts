/**
 * The live phase of a graph (application/vnd.xlanb.phase+json, xlanb/notebook/progress.py): what
 * the kernel shows while a graph lowers, compiles or runs on the device for longer than a second,
 * updated every 0.5 s through update_display_data and finished with the total. Plain DOM, no
 * JupyterLab import: mime.ts wraps it as the MIME renderer, store.ts and status.ts read the data.
 */

import { h } from './dom';

export const PHASE_MIME = 'application/vnd.xlanb.phase+json';

export type PhaseName = 'lowering' | 'compiling' | 'running';

export interface IPhase {
  phase: PhaseName;
  graph: string;
  ops: number | null;
  seconds: number;
  done: boolean;
  slow_after: number | null;
  note: string | null;
}

export function isPhase(p: unknown): p is IPhase {
  const q = p as IPhase;
  return (
    typeof p === 'object' &&
    p !== null &&
    (q.phase === 'lowering' || q.phase === 'compiling' || q.phase === 'running') &&
    typeof q.graph === 'string' &&
    typeof q.seconds === 'number' &&
    typeof q.done === 'boolean'
  );
}

/** " (12 ops)", or "" when the size is unknown. */
export function phaseSize(p: IPhase): string {
  return typeof p.ops === 'number' ? ` (${p.ops} ops)` : '';
}

export function phaseSeconds(p: IPhase): string {
  return `${p.seconds.toFixed(1)} s`;
}

/** The finished phase's verb, as the text/plain line says it. */
export function doneVerb(p: IPhase): string {
  return p.phase === 'running' ? 'ran on the device for' : 'compiled and launched in';
}

/**
 * Draws the phase into `host` (as one .xlanb-lab-phase element). A live phase updates the
 * elements already there, so the indeterminate bar's animation runs on across the kernel's
 * updates instead of restarting.
 */
export function renderPhase(host: HTMLElement, data: unknown): void {
  let root = host.querySelector<HTMLElement>(':scope > .xlanb-lab-phase');
  if (!root) {
    root = h('div', { class: 'xlanb-lab-phase' });
    host.replaceChildren(root);
  }
  if (!isPhase(data)) {
    root.dataset.phase = 'unknown';
    root.replaceChildren(h('div', { class: 'xl-phase-line', text: 'xlanb: a phase this extension cannot read' }));
    return;
  }
  root.dataset.phase = data.phase;
  root.dataset.done = String(data.done);
  if (data.done) {
    root.replaceChildren(
      h(
        'div',
        { class: 'xl-phase-line xl-phase-done' },
        h('span', { class: 'xl-brand', text: 'xlanb' }),
        ' graph ',
        h('code', { class: 'xl-phase-graph', text: data.graph }),
        `${phaseSize(data)} ${doneVerb(data)} ${phaseSeconds(data)}`
      )
    );
    return;
  }
  let line = root.querySelector<HTMLElement>(':scope > .xl-phase-live');
  if (!line) {
    line = h(
      'div',
      { class: 'xl-phase-line xl-phase-live' },
      h('span', { class: 'xl-brand', text: 'xlanb' }),
      ' ',
      h('span', { class: 'xl-phase-word' }),
      ' graph ',
      h('code', { class: 'xl-phase-graph' }),
      h('span', { class: 'xl-phase-ops' }),
      ' ',
      h('span', { class: 'xl-phase-bar', role: 'progressbar', 'aria-label': 'in progress' }, h('span')),
      ' ',
      h('span', { class: 'xl-phase-seconds' })
    );
    root.replaceChildren(line, h('div', { class: 'xl-phase-note' }));
  }
  const set = (cls: string, text: string) => {
    line!.querySelector(`.${cls}`)!.textContent = text;
  };
  set('xl-phase-word', data.phase);
  set('xl-phase-graph', data.graph);
  set('xl-phase-ops', phaseSize(data));
  set('xl-phase-seconds', phaseSeconds(data));
  const note = root.querySelector<HTMLElement>(':scope > .xl-phase-note')!;
  note.replaceChildren(...(data.note ? [h('b', { text: data.note })] : []));
  note.hidden = !data.note;
}
