/**
 * The status bar item: the runtime mode of the current notebook's kernel and its pending ops,
 * "XLA: eager · 0 ops pending", "XLA: lazy · 12 ops pending", "XLA: compiling step"; while a
 * graph lowers, compiles or runs for over a second, the phase: "XLA: compiling step (600 ops) ·
 * 3.2 s".
 * It never says "Idle": tools that read JupyterLab's kernel status look for that word in the
 * status bar (galata waits for `#jp-main-statusbar >> text=Idle`).
 */

import { Widget } from '@lumino/widgets';

import { plural } from './dom';
import { XlaModel } from './model';
import { IPhase, phaseSeconds, phaseSize } from './phase';
import { KernelXlaState } from './store';

export const STATUS_ID = 'xlanb-status';

/** The live phase: "XLA: compiling step (600 ops) · 3.2 s"; the title adds the note. */
export function phaseText(p: IPhase): { text: string; title: string } {
  const where = p.phase === 'running' ? ' on the device' : '';
  const title = `xlanb is ${p.phase} graph ${p.graph}${phaseSize(p)}${where} for ${phaseSeconds(p)}`;
  return {
    text: `XLA: ${p.phase} ${p.graph}${phaseSize(p)} \u00b7 ${phaseSeconds(p)}`,
    title: p.note ? `${title}; ${p.note}` : title
  };
}

export function statusText(s: KernelXlaState | null): { text: string; title: string } {
  if (s?.phase) {
    return phaseText(s.phase);
  }
  if (!s || (s.mode === null && !s.compiling)) {
    return {
      text: 'XLA: \u2013',
      title: s?.notice ?? 'xlanb is not loaded in this kernel (%load_ext xlanb)'
    };
  }
  if (s.compiling) {
    return { text: `XLA: compiling ${s.compiling}`, title: `An %%xla_compile cell runs: graph ${s.compiling}` };
  }
  const pending = s.pending === null ? '' : ` \u00b7 ${plural(s.pending, 'op')} pending`;
  const title =
    s.mode === 'eager'
      ? 'eager mode: every op is compiled (once per shape) and run at once'
      : 'lazy mode: ops are recorded and run at xlanb.sync() or when a value is needed';
  return { text: `XLA: ${s.mode}${pending}`, title };
}

export class XlaStatus extends Widget {
  constructor(
    private readonly model: XlaModel,
    onClick: () => void
  ) {
    super();
    this.id = STATUS_ID;
    this.addClass('xlanb-status');
    this.node.addEventListener('click', onClick);
    model.changed.connect(() => this.update(), this);
    this.update();
  }

  protected onUpdateRequest(): void {
    const { text, title } = statusText(this.model.current);
    const s = this.model.current;
    this.node.textContent = text;
    this.node.title = title + ' (click: the XLA sidebar)';
    this.node.dataset.mode = s?.phase ? s.phase.phase : s?.compiling ? 'compiling' : (s?.mode ?? 'none');
  }
}
