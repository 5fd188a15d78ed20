/**
 * What the sidebar and the status bar know about one kernel, aggregated from the cell reports
 * that kernel sends on IOPub, plus the cell that runs now. Plain data and one `changed` signal.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { IPhase } from './phase';
import { IGraph, IReport, isSupported } from './types';

/** One graph name: every compile of it in this kernel (a recompile is another key). */
export interface IGraphEntry {
  name: string;
  key: string; // the latest compiled key
  keys: string[]; // every key compiled under this name, oldest first
  eager: boolean;
  compiles: number;
  compileMs: number; // lower + XLA compile, summed
  executions: number;
  executeMs: number;
  lastRecompile: string | null;
  lastCell: number | null;
  latest: IGraph; // the latest compile: its IR, HLO and DAG
}

export interface IFallbackEntry {
  op: string;
  reason: string;
  count: number;
  graphs: string[];
  where: string;
}

export type Mode = 'eager' | 'lazy';

export class KernelXlaState {
  readonly graphs = new Map<string, IGraphEntry>();
  readonly fallbacks = new Map<string, IFallbackEntry>();
  reports = 0;
  cacheHits = 0;
  cacheMisses = 0;
  persistentHits = 0;
  eagerCompiles = 0;
  eagerExecutions = 0;
  compileMs = 0;
  executeMs = 0;
  /** Runtime mode after the last cell, when known (null: no xlanb in this kernel yet). */
  mode: Mode | null = null;
  /** Pending IR nodes held after the last cell, when known. */
  pending: number | null = null;
  /** The exact cache size, when the report carries it (state.cache_size). */
  cacheSize: number | null = null;
  /** The graph name of the %%xla_compile cell running now. */
  compiling: string | null = null;
  /** The phase of a graph lowering, compiling or running for over a second (the kernel's phase line). */
  phase: IPhase | null = null;
  /** Why the state was last cleared (kernel restart, new kernel), shown until the next report. */
  notice: string | null = null;
  /** The mesh of the last graph that ran on several devices ("mesh data=2 model=4"; schema 1.3). */
  mesh: { text: string; devices: number; graph: string } | null = null;
  private seen = new Set<string>();
  private _changed = new Signal<this, void>(this);

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Executables compiled so far in this kernel (graph keys and eager op compiles). */
  get executables(): number {
    if (this.cacheSize !== null) {
      return this.cacheSize;
    }
    let n = this.eagerCompiles;
    for (const g of this.graphs.values()) {
      n += g.eager ? 0 : g.keys.length; // eager op graphs (full style) are in eagerCompiles
    }
    return n;
  }

  get hitRate(): number | null {
    const total = this.cacheHits + this.cacheMisses;
    return total ? this.cacheHits / total : null;
  }

  /** Adds one report; a message id seen before (two panels on one kernel) is skipped. */
  addReport(data: unknown, msgId = ''): boolean {
    if (!isSupported(data)) {
      return false;
    }
    if (msgId) {
      if (this.seen.has(msgId)) {
        return false;
      }
      this.seen.add(msgId);
    }
    const r = data as IReport;
    const s = r.summary;
    this.reports++;
    this.notice = null;
    this.cacheHits += s.cache_hits;
    this.cacheMisses += s.cache_misses;
    this.persistentHits += s.persistent_hits;
    this.compileMs += s.lower_ms + s.compile_ms;
    this.executeMs += s.execute_ms;
    this.eagerCompiles += r.eager ? r.eager.compiles : s.eager_ops_compiled;
    this.eagerExecutions += r.eager ? r.eager.executions : s.eager_ops_executed;
    for (const g of r.graphs) {
      this.addGraph(g, r.cell.execution_count);
    }
    const partitioned = (r as { devices?: { graphs: { name: string; mesh?: string; devices: number }[] } | null })
      .devices?.graphs;
    if (partitioned && partitioned.length) {
      const last = partitioned[partitioned.length - 1];
      this.mesh = { text: last.mesh || `${last.devices} devices`, devices: last.devices, graph: last.name };
    }
    for (const c of r.cached) {
      const e = this.graphs.get(c.name);
      if (e) {
        e.executions += c.executions;
        e.executeMs += c.execute_ms;
      }
    }
    for (const f of r.fallbacks) {
      const key = `${f.op}\u0000${f.reason}`;
      const e = this.fallbacks.get(key) ?? { op: f.op, reason: f.reason, count: 0, graphs: [], where: '' };
      e.count += f.count;
      for (const g of f.graphs) {
        if (!e.graphs.includes(g)) {
          e.graphs.push(g);
        }
      }
      e.where = f.where ? f.where.text : e.where;
      this.fallbacks.set(key, e);
    }
    this.updateState(r);
    this._changed.emit();
    return true;
  }

  private addGraph(g: IGraph, cell: number | null): void {
    let e = this.graphs.get(g.name);
    if (!e) {
      e = {
        name: g.name,
        key: g.key,
        keys: [],
        eager: g.eager,
        compiles: 0,
        compileMs: 0,
        executions: 0,
        executeMs: 0,
        lastRecompile: null,
        lastCell: null,
        latest: g
      };
      this.graphs.set(g.name, e);
    }
    e.compiles++;
    e.key = g.key;
    if (!e.keys.includes(g.key)) {
      e.keys.push(g.key);
    }
    e.compileMs += g.lower_ms + g.compile_ms;
    e.executions += g.executions;
    e.executeMs += g.execute_ms;
    if (g.recompile) {
      e.lastRecompile = g.recompile.text;
    }
    e.lastCell = cell;
    e.latest = g;
  }

  /**
   * Mode and pending ops after the cell. A report with `state` (a later 1.x) says so exactly;
   * a 1.0 report gives the cell's mode, and pending IR only when the cell left some behind.
   */
  private updateState(r: IReport): void {
    const st = r.state;
    if (st && (st.mode === 'eager' || st.mode === 'lazy')) {
      this.mode = st.mode;
    } else if (r.cell.mode === 'eager' || r.cell.mode === 'lazy') {
      this.mode = r.cell.mode;
    } else if (this.mode === null) {
      this.mode = 'eager'; // %%xla_compile restores the mode; after %load_ext it is eager
    }
    if (st && typeof st.pending_nodes === 'number') {
      this.pending = st.pending_nodes;
    } else if (r.pending) {
      this.pending = r.pending.nodes;
    } else if (this.mode === 'eager' || r.summary.syncs > 0) {
      this.pending = 0;
    }
    if (st && typeof st.cache_size === 'number') {
      this.cacheSize = st.cache_size;
    }
  }

  /** A cell finished that changed the mode without a report (%load_ext, %xla_mode). */
  setMode(mode: Mode | null): void {
    if (mode !== this.mode) {
      this.mode = mode;
      if (mode === null || (mode === 'eager' && this.pending === null)) {
        this.pending = mode === null ? null : 0;
      }
      this._changed.emit();
    }
  }

  setCompiling(name: string | null): void {
    if (name !== this.compiling) {
      this.compiling = name;
      this._changed.emit();
    }
  }

  /** The latest live phase; a finished one (or null) clears it. */
  setPhase(p: IPhase | null): void {
    const next = p && !p.done ? p : null;
    if (next !== this.phase) {
      this.phase = next;
      this._changed.emit();
    }
  }

  /** Forgets everything: the kernel restarted or was replaced. */
  reset(notice: string): void {
    this.graphs.clear();
    this.fallbacks.clear();
    this.seen.clear();
    this.reports = this.cacheHits = this.cacheMisses = this.persistentHits = 0;
    this.eagerCompiles = this.eagerExecutions = 0;
    this.compileMs = this.executeMs = 0;
    this.mode = this.pending = this.cacheSize = null;
    this.compiling = null;
    this.phase = null;
    this.mesh = null;
    this.notice = notice;
    this._changed.emit();
  }
}

/** The graph name an `%%xla_compile` cell compiles under (magics.py: --name, else cell_<id>). */
export function compileCellName(code: string, cellId: string | null): string | null {
  const first = code.replace(/^\s*\n/, '').split('\n', 1)[0];
  const m = /^\s*%%xla_compile\b(.*)$/.exec(first);
  if (!m) {
    return null;
  }
  const name = /--name(?:=|\s+)(?:"([^"]+)"|'([^']+)'|(\S+))/.exec(m[1]);
  if (name) {
    return name[1] ?? name[2] ?? name[3];
  }
  return cellId ? `cell_${cellId.replace(/-/g, '').slice(0, 8)}` : 'cell';
}

/** The mode a cell sets when it succeeds: `%load_ext xlanb` (eager), `%xla_mode eager|lazy`. */
export function modeSetByCell(code: string): Mode | null | undefined {
  let mode: Mode | null | undefined = undefined;
  for (const line of code.split('\n')) {
    const t = line.trim();
    if (/^%(re)?load_ext\s+xlanb\b/.test(t)) {
      mode = mode ?? 'eager';
    } else if (/^%unload_ext\s+xlanb\b/.test(t)) {
      mode = null;
    } else {
      const m = /^%xla_mode\s+(eager|lazy)\b/.exec(t);
      if (m) {
        mode = m[1] as Mode;
      }
    }
  }
  return mode;
}
