/**
 * Follows every notebook's kernel: the cell reports it sends on IOPub, the %%xla_compile cell
 * that runs now, the live phase of a long compile or run, restarts and kernel changes. One
 * KernelXlaState per kernel id; `current` is the state of the active notebook's kernel, which the
 * sidebar and the status bar show.
 */

import { ISessionContext } from '@jupyterlab/apputils';
import { IChangedArgs } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { isPhase, PHASE_MIME } from './phase';
import { compileCellName, KernelXlaState, modeSetByCell } from './store';
import { REPORT_MIME } from './types';

interface IRun {
  msgId: string;
  code: string;
  failed: boolean;
}

const MAX_SENT = 256;

/** Watches one notebook panel's session. */
class PanelWatcher {
  private sent = new Map<string, string | null>(); // execute_request msg_id -> cell id
  private run: IRun | null = null;
  private phaseParent: string | null = null; // the execute_request whose cell shows the live phase
  private kernel: Kernel.IKernelConnection | null = null;

  constructor(
    private readonly panel: NotebookPanel,
    private readonly model: XlaModel
  ) {
    const sc = panel.sessionContext;
    sc.iopubMessage.connect(this.onIOPub, this);
    sc.statusChanged.connect(this.onStatus, this);
    sc.kernelChanged.connect(this.onKernelChanged, this);
    this.attach(sc.session?.kernel ?? null);
    panel.disposed.connect(() => {
      sc.iopubMessage.disconnect(this.onIOPub, this);
      sc.statusChanged.disconnect(this.onStatus, this);
      sc.kernelChanged.disconnect(this.onKernelChanged, this);
      this.attach(null);
    });
  }

  private get state(): KernelXlaState | null {
    const id = this.panel.sessionContext.session?.kernel?.id;
    return id ? this.model.stateFor(id) : null;
  }

  private attach(kernel: Kernel.IKernelConnection | null): void {
    this.kernel?.anyMessage.disconnect(this.onAnyMessage, this);
    this.kernel = kernel;
    this.kernel?.anyMessage.connect(this.onAnyMessage, this);
  }

  /** Remembers which cell each execute_request came from (the default %%xla_compile name). */
  private onAnyMessage(_: Kernel.IKernelConnection, args: Kernel.IAnyMessageArgs): void {
    const msg = args.msg;
    if (args.direction === 'send' && msg.header.msg_type === 'execute_request') {
      const cellId = (msg.metadata as { cellId?: string } | undefined)?.cellId ?? null;
      this.sent.set(msg.header.msg_id, cellId);
      if (this.sent.size > MAX_SENT) {
        this.sent.delete(this.sent.keys().next().value as string);
      }
    }
  }

  private onIOPub(_: ISessionContext, msg: KernelMessage.IMessage): void {
    const state = this.state;
    if (!state) {
      return;
    }
    const type = msg.header.msg_type;
    const parent = (msg.parent_header as Partial<KernelMessage.IHeader>)?.msg_id ?? '';
    if (type === 'display_data' || type === 'execute_result' || type === 'update_display_data') {
      const data = (msg.content as KernelMessage.IDisplayDataMsg['content']).data;
      if (data && REPORT_MIME in data && type !== 'update_display_data') {
        state.addReport(data[REPORT_MIME], msg.header.msg_id);
      }
      if (data && PHASE_MIME in data) {
        // every live phase line ends with its done bundle, sent by the same kernel thread after it
        const phase = data[PHASE_MIME];
        this.phaseParent = isPhase(phase) && !phase.done ? parent : null;
        state.setPhase(isPhase(phase) ? phase : null);
      }
    } else if (type === 'execute_input') {
      const code = (msg.content as KernelMessage.IExecuteInputMsg['content']).code;
      this.run = { msgId: parent, code, failed: false };
      state.setCompiling(compileCellName(code, this.sent.get(parent) ?? null));
    } else if (type === 'error' && this.run && parent === this.run.msgId) {
      this.run.failed = true;
    } else if (type === 'status') {
      if ((msg.content as KernelMessage.IStatusMsg['content']).execution_state !== 'idle') {
        return;
      }
      if (this.phaseParent !== null && parent === this.phaseParent) {
        this.phaseParent = null;
        state.setPhase(null); // the cell ended without the done bundle (it should not)
      }
      if (this.run && parent === this.run.msgId) {
        const run = this.run;
        this.run = null;
        state.setCompiling(null);
        state.setPhase(null);
        const mode = run.failed ? undefined : modeSetByCell(run.code);
        const loadsOnly = /^\s*%(re)?load_ext\s+xlanb\b/m.test(run.code) && !/%xla_mode/.test(run.code);
        if (mode !== undefined && !(loadsOnly && state.mode !== null)) {
          state.setMode(mode); // loading twice keeps the mode it had
        }
      }
    }
  }

  private onStatus(_: ISessionContext, status: Kernel.Status): void {
    const state = this.state;
    if (!state) {
      return;
    }
    const at = new Date().toLocaleTimeString();
    if (status === 'restarting' || status === 'autorestarting') {
      this.run = this.phaseParent = null;
      state.reset(`The kernel restarted at ${at}: the graphs compiled before are gone, and so is the cache.`);
    } else if (status === 'dead') {
      this.run = this.phaseParent = null;
      state.reset(`The kernel died at ${at}.`);
    }
  }

  private onKernelChanged(
    _: ISessionContext,
    change: IChangedArgs<Kernel.IKernelConnection | null, Kernel.IKernelConnection | null, 'kernel'>
  ): void {
    this.run = this.phaseParent = null;
    this.attach(change.newValue);
    if (change.newValue && change.oldValue && change.newValue.id !== change.oldValue.id) {
      const at = new Date().toLocaleTimeString();
      this.model.stateFor(change.newValue.id).reset(`A new kernel started at ${at}: nothing compiled in it yet.`);
    }
    this.model.refresh();
  }
}

export class XlaModel {
  private states = new Map<string, KernelXlaState>();
  private _changed = new Signal<this, void>(this);
  private watched: KernelXlaState | null = null;

  constructor(private readonly tracker: INotebookTracker) {
    tracker.widgetAdded.connect((_, panel) => new PanelWatcher(panel, this));
    tracker.forEach(panel => new PanelWatcher(panel, this));
    tracker.currentChanged.connect(() => this.refresh());
  }

  /** Fires when the current state changes, or the current notebook or kernel does. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get panel(): NotebookPanel | null {
    return this.tracker.currentWidget;
  }

  /** The state of the current notebook's kernel, or null without one. */
  get current(): KernelXlaState | null {
    const id = this.panel?.sessionContext.session?.kernel?.id;
    return id ? this.stateFor(id) : null;
  }

  stateFor(kernelId: string): KernelXlaState {
    let s = this.states.get(kernelId);
    if (!s) {
      s = new KernelXlaState();
      this.states.set(kernelId, s);
    }
    return s;
  }

  /** Re-evaluates `current` and tells listeners. */
  refresh(): void {
    const cur = this.current;
    if (cur !== this.watched) {
      this.watched?.changed.disconnect(this.emit, this);
      cur?.changed.connect(this.emit, this);
      this.watched = cur;
    }
    this._changed.emit();
  }

  private emit(): void {
    this._changed.emit();
  }
}
