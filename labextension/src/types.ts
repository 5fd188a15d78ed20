/**
 * The cell report JSON (docs/report-schema.md, version 1.x), as far as this extension reads it.
 * A renderer accepts any 1.x and ignores fields it does not know, so every field that a later
 * minor version adds is optional here.
 */

export const REPORT_MIME = 'application/vnd.xlanb.report+json';

export interface ITensor {
  shape: number[];
  dtype: string;
  text: string;
}

export interface IWhere {
  text: string;
  filename?: string;
  lineno?: number;
  function?: string;
  source?: string | null;
  cell?: number | null;
}

export interface IIr {
  text: string;
  nodes: number;
  truncated: boolean;
  lines?: unknown[];
}

export interface IDag {
  nodes: number;
  drawn: number;
  collapsed: string;
  svg: string;
}

/** One IR line (schema 1.2 adds `scope`, the nn.Module path; null outside modules). */
export interface IIrLine {
  index: number;
  op: string;
  text: string;
  is_input?: boolean;
  location?: string;
  scope?: string | null;
}

export interface IModules {
  groups: { path: string; ops: number; total: number; top: string }[];
  dag: IDag | null;
  expanded: Record<string, IDag>;
}

export interface IFusion {
  name: string;
  kind: string;
  nodes: number[];
  ops: string[];
  modules: string[];
  lines: string[];
  out_bytes: number;
  text: string;
  /** XLA's cost analysis of the fusion alone (1.4; null or absent: not analysed). */
  flops?: number | null;
  transcendentals?: number | null;
  bytes_accessed?: number | null;
}

export interface IFailure {
  error: string;
  op: string;
  where: IWhere | null;
  highlight: number[];
  text: string;
}

export interface IMemory {
  holders: {
    name: string;
    kind: string;
    bytes: number;
    tensors: number;
    pending: number;
    change: number | null;
  }[];
  others: number;
  others_bytes: number;
  attributed: number;
  total: number;
  change: number | null;
  device: string;
  capacity: number | null;
  stats: Record<string, number> | null;
  warnings: string[];
  text: string;
}

export interface IHloStage {
  text: string;
  lines: number;
  truncated: boolean;
}

export interface IRecompile {
  graph: string;
  key: string;
  against: string;
  text: string;
  changes?: { kind: string; text: string }[];
}

export interface IGraph {
  name: string;
  key: string;
  eager: boolean;
  cause: string;
  where: IWhere | null;
  nodes: number;
  scalars: number;
  inputs: ITensor[];
  outputs: ITensor[];
  lower_ms: number;
  compile_ms: number;
  persistent_hit: boolean;
  executions: number;
  execute_ms: number;
  fallback_ops: string[];
  matmul_precision?: string; // schema 1.6: torch's float32 matmul precision the graph was lowered at
  compile_effort?: string; // schema 1.6: how hard XLA optimized it ('default' | 'fast')
  recompile: IRecompile | null;
  ir: IIr;
  dag: IDag | null;
  hlo: { stablehlo: IHloStage | null; optimized: IHloStage | null } | null;
  cost: Record<string, number> | null;
  memory: Record<string, number> | null;
  modules?: IModules | null;
  fusions?: IFusion[];
}

export interface ICached {
  name: string;
  key: string;
  executions: number;
  execute_ms: number;
}

export interface IEagerOp {
  op: string;
  signature: string;
  compiles: number;
  compile_ms: number;
}

export interface IForced {
  kind: string;
  cause: string;
  graph: string;
  where: IWhere | null;
  count: number;
}

export interface IFallback {
  op: string;
  reason: string;
  graphs: string[];
  where: IWhere | null;
  count: number;
}

export interface IPending {
  nodes: number;
  tensors: { name: string; type: string }[];
  unnamed: number;
  ir: IIr;
  dag: IDag | null;
  modules?: IModules | null;
  failure?: IFailure | null;
}

export interface ITransfer {
  count: number;
  bytes: number;
  ms: number;
}

export interface ISummary {
  graphs_compiled: number;
  graphs_executed: number;
  eager_ops_compiled: number;
  eager_ops_executed: number;
  cache_hits: number;
  cache_misses: number;
  persistent_hits: number;
  lower_ms: number;
  compile_ms: number;
  execute_ms: number;
  syncs: number;
  /** Replayed calls among graphs_executed (1.5). */
  replayed?: number;
  forced: number;
  fallbacks: number;
  to_device: ITransfer;
  from_device: ITransfer;
  text: string;
}

/** Fields this extension would use if a later 1.x report had them (see labextension/README.md). */
export interface IRuntimeState {
  mode?: 'eager' | 'lazy';
  pending_nodes?: number;
  cache_size?: number;
}

export interface IReport {
  version: string;
  cell: {
    execution_count: number | null;
    cell_id: string | null;
    mode: 'eager' | 'lazy' | 'compiled';
    style: 'on' | 'compact' | 'full' | string;
    wall_ms: number;
  };
  summary: ISummary;
  graphs: IGraph[];
  cached: ICached[];
  eager: {
    ops: IEagerOp[];
    compiles: number;
    executions: number;
    compile_ms: number;
    execute_ms: number;
  };
  forced: IForced[];
  fallbacks: IFallback[];
  recompiles: IRecompile[];
  pending: IPending | null;
  errors: string[];
  timeline: { spans: unknown[]; omitted: number; svg: string };
  text: string;
  state?: IRuntimeState;
  memory?: IMemory | null;
  torch_compile?: ITorchCompile | null;
  replay?: IReplay | null;
  compare?: ICompare | null;
}

/** A reason said in the cell, once, with how often it came. */
export interface IReason {
  reason: string;
  count: number;
}

/** One xlanb.compile(fn, replay=True) function in the cell (schema 1.5). */
export interface IReplayedFunction {
  name: string;
  /** Calls replayed (0 when every call traced). */
  calls: number;
  host_ms: number;
  /** Host time per replayed call, the mean, in microseconds. */
  per_call_us: number;
  /** The executables launched, in first-use order. */
  keys: string[];
  donated?: number;
  /** Calls traced instead: the failed guard. */
  misses: IReason[];
  /** Why the traced calls cannot be replayed. */
  not_replayable: IReason[];
  lines: string[];
}

/** Step replay in the cell (schema 1.5). */
export interface IReplay {
  functions: IReplayedFunction[];
  lines: string[];
}

/** An op of an xlanb.compare() region, its xla outputs against its CPU twin's (schema 1.6). */
export interface ICompareRow {
  index: number;
  op: string;
  /** `cell line 3`, `model.py:12`, or "". */
  location: string;
  module: string;
  phase: 'forward' | 'backward' | string;
  status: 'ok' | 'introduced' | 'inherited' | string;
  /** A number, or "inf" / "nan" (JSON has neither). */
  max_abs: number | string;
  max_rel: number | string;
  shape?: number[];
  dtype?: string;
}

/** One xlanb.compare() region (schema 1.6). */
export interface ICompareRegion {
  ok: boolean;
  /** Ops compared, and ops not compared (random, uninitialized, not runnable on the CPU). */
  ops: number;
  skipped: number;
  /** null: torch.testing.assert_close's tolerance for each dtype. */
  rtol: number | string | null;
  atol: number | string | null;
  precision: string;
  hint: string;
  /** Ops whose outputs differ (introduced or inherited). */
  differ: number;
  first: ICompareRow | null;
  /** The rows around the first divergence (none when every op agreed). */
  rows: ICompareRow[];
  /** Rows of the region not in `rows`. */
  hidden: number;
  /** The headline: `compare: first divergence at ...` or `compare: 214 ops within tolerance ...`. */
  text: string;
  /** `214 ops compared (rtol/atol: torch defaults), 41 differ, 3 not compared; ops 9 to 20 shown`. */
  detail?: string;
  lines: string[];
}

/** xlanb.compare() in the cell, one entry per region (schema 1.6). */
export interface ICompare {
  regions: ICompareRegion[];
  lines: string[];
}

/** An FX graph torch.compile(backend="xlanb") handed to the backend (schema 1.2). */
export interface ITorchCompileGraph {
  name: string;
  kind: 'forward' | 'backward' | 'inference' | string;
  /** `macro`: one lazy node per call; `replay`: op by op (see `reason`). */
  path: 'macro' | 'replay' | string;
  ops: number;
  inputs: number;
  reason: string;
  location: string;
}

/** A graph break, or a frame captured again after a guard failed (`reason` is the guard). */
export interface ITorchCompileEvent {
  reason: string;
  location: string;
}

/** What torch.compile(backend="xlanb") did in the cell (schema 1.2). */
export interface ITorchCompile {
  graphs: ITorchCompileGraph[];
  breaks: ITorchCompileEvent[];
  recaptures: ITorchCompileEvent[];
  /** The text form, one line each. */
  lines: string[];
}

/** True for a report this extension can render (major version 1). */
export function isSupported(r: unknown): r is IReport {
  return (
    typeof r === 'object' &&
    r !== null &&
    typeof (r as IReport).version === 'string' &&
    (r as IReport).version.split('.')[0] === '1'
  );
}
