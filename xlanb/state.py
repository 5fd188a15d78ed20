"""The Runtime: every piece of xlanb's process state, in one object.

Modules hold no state of their own; they read and write the one Runtime that
`runtime_state()` returns. `reset()` restores it in place to a fresh runtime (nothing
pending, caches empty, counters zeroed, lazy mode), so references taken earlier stay
valid. Listeners subscribed to the event log, and open `recording_texts()` scopes, survive a
reset: they belong to whoever opened them (the metrics counter, the debug printer, a loaded
notebook extension).

Not state, and so not reset: interned tensor metadata (`ir.node.intern_meta`), each op's
memoised plan and meta-kernel results, and the lowering table. They are pure functions of
their keys, as a compiled regex is.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import importlib.metadata
import importlib.util
import os
import threading
import weakref

import jax

from xlanb._config import Config, config, fix_field
from xlanb.events import EventLog


class Runtime:
    """All of xlanb's process state. Fields are grouped by the layer that owns them."""

    def __init__(self):
        self.log = EventLog()                  # every event (xlanb.events); listeners survive reset()
        self.device = None                     # the torch device (xla:0), set once by the install step
        # guards the metrics below (listeners may run on any thread); reentrant: a weakref callback that
        # counts a destroyed tensor (compat) may run inside a garbage collection on a thread holding it
        self.lock = threading.RLock()
        self._jax_devices: dict = {}           # platform -> jax devices (jax.devices is slow to call)
        # whether glibc's malloc was set for XLA's CPU temporaries (reuse_host_memory); None until
        # xla:0 is first found to be a CPU. A process setting: reset() keeps it
        self.host_memory: bool | None = None
        # None until asked: whether the process has more than one device, so a buffer can be sharded
        # (the eager fast path checks shardings only then); a mirror of JAX, like _jax_devices
        self.several_devices: bool | None = None
        # "f.py:3" -> how a reader names that line ("In [6] line 3"); the notebook extension sets it
        self.location_namer = None
        # > 0: Compile events carry HLO texts and analyses; counts the open recording_texts()
        # scopes, which belong to whoever opened them (a loaded notebook extension): not reset
        self.want_texts = 0
        # capture.scopes' nn.Module.__call__ wrapper while recording_modules() scopes are open
        # (their count, the wrapper put in, the marks of autograd sequence numbers, a weakref to the last
        # outermost module): owned by whoever opened them, as want_texts is: not reset
        self.module_hooks: list = [0, None, None, None]
        # compat: the mesh `xs.set_global_mesh` set (a user's setting, kept by reset() as the device is)
        self.global_mesh = None
        # compat's per-op counters: called with (op, ns) after each op is recorded (capture/dispatch.py
        # routes ops through it only while it is set); installed with compat, kept by reset()
        self.op_listener = None
        # compat's tensor counters: called with each xla tensor made (capture/tensor.py); kept by reset()
        self.tensor_listener = None
        # spmd/manual.py made a manual value once (in this process: one may outlive a reset): syncs leave
        # manual values pending (lower/rules/sharding.py)
        self.manual_used = False
        self._fresh()

    def _fresh(self) -> None:
        # capture: modes
        self.eager = False                     # every op is synced at once (xlanb.eager_mode)
        self.graph_name = "sync"               # name given to the next lazily synced graph
        self.allow_execution = True            # False inside xlanb.compile(full_graph=True)
        # record the user's source line on every node (always while debug_nans is on: capture/nans.py)
        self.track_locations = config().debug_nans
        # while an op is dispatched with lines recorded: the frame that called it (False: none did)
        self.op_caller = None
        self.compile_scope = None              # the active xlanb.compile scope (capture.modes.CompileScope)
        # the warnings CPU probes raise while an op's meta is inferred, to be given as CPU gives them
        # (capture/record.py's infer_meta; None outside it: lower/fallback.py's probe_on_cpu drops them)
        self.kernel_warnings = None
        self.observer = None                   # called with each new pending node (graph limits)
        # capture.scopes: the innermost running nn.Module's path (a str), a callable naming the module
        # of the backward op being recorded, or None when module scopes are not recorded
        self.module_scope = None
        self.module_stack: list = []           # (module, path) of the running modules
        self.detectors: dict = {}              # name (context manager) or function token -> Detector
        # capture: pending work
        # weakrefs to holders (LazyTensor or Storage) whose value may be pending, in
        # first-pending order; deduplicated and cleared at each full sync
        self.pending: list[weakref.ref] = []
        self.prune_at = 4096
        # computed nodes overwritten by in-place writes: their buffers may be donated
        self.overwritten: weakref.WeakSet = weakref.WeakSet()
        # (tensor, the pending fill an in-place write replaced): made device data at the next sync (capture/fills.py)
        self.state_fills: list = []
        # errors raised inside the autograd engine, re-raised at the next sync
        self.deferred: list[BaseException] = []
        # index bounds checks computed in the graph, raised at the next value read (capture.bounds)
        self.device_checks: list = []
        # (id of a computed buffer, a check's bounds) -> the buffer, for host-readable buffers that passed
        # that check (capture/bounds.py; kept so that the id stays theirs)
        self.passed_checks: dict = {}
        # debug_nans: checked graphs whose NaN flag is not read yet, oldest first, and the NaN one of
        # them was found to hold (runtime/nans.py), raised by capture once the outputs are stored
        self.nan_checks: list = []
        self.nan_error = None
        self.rng = None                        # the Storage of the device RNG key (capture.rng)
        # (weakref to a computed node, its value on the host): the last base a view was read from
        self.last_download = (None, None)
        # runtime: compiled graphs and launches
        # the LRU of executables: its class, and so its policy, is the runtime floor's (runtime/cache.py)
        self.cache = self.new_cache() if self.new_cache is not None else None
        self.eager_ops: dict = {}              # eager fast path: (op, input types) -> CacheKey of its graph
        self.eager_write_memo = None           # (op, fast key, inputs, lifted numbers) of the in-place op running
        self.history: dict[str, collections.deque] = {}    # graph name -> recent CacheKeys (explainer)
        self.outstanding: list = []            # launched output arrays not yet known to be finished
        self.outstanding_limit = 64            # its length that makes the next launch drop the finished ones
        # xlanb.generate: model -> {(batch, prompt, new tokens, choice, dtype): its decoder (static cache, the
        # step's tensors, the replayed step)}; weak, so a model dropped takes its caches with it
        self.decoders = weakref.WeakKeyDictionary()
        self.last_cpu_mesh_launch: list = []   # outputs of the last program over several CPU devices (executor.call)
        # (op, exception) pairs torch raised in CPU fallback ops while programs ran (lower/fallback.py):
        # the launch, read or wait that meets XLA's callback error raises torch's (runtime/device_errors.py)
        self.fallback_errors: collections.deque = collections.deque(maxlen=8)
        # metrics (xlanb.metrics): torch_xla's counters and timed metrics
        self.counters: dict[str, int] = {}
        self.metrics: dict[str, list] = {}     # name -> [count, total, samples[(wall_s, value)]]
        self.fallback_counters: set[str] = set()
        self.faults: dict[str, str] = {}       # test-only: stage -> kind, raised once there (inject_fault)
        # capture.compare: the open xlanb.compare() region, and the nodes whose buffers it reads at its
        # end (never donated while it is open)
        self.comparing = None
        self.kept: set = set()
        # compat (xlanb/compat/steps.py): torch_xla's step closures, (closure, args) to run after the next
        # sync, in order; async ones go to its background thread; an error an async one raised waits
        # here for the main thread's next sync
        self.step_closures: list = []
        self.async_step_closures: list = []
        self.async_step_errors: list = []
        # compat: keys of graphs compiled for several devices (their runs count as ExecuteReplicatedTime),
        # and whether an xp.StepTrace ended the step with a sync (the parallel loader then skips its own)
        self.partitioned_keys: set = set()
        self.tracer_marked_step = False

    # --- the public surface ------------------------------------------------------------
    @property
    def config(self) -> Config:
        """The configuration in force now (`xlanb._config.override` changes it for a scope)."""
        return config()

    def reset(self) -> None:
        """Back to a fresh runtime: nothing pending, caches and event log empty, counters at zero,
        lazy mode, graph limits forgotten. Launched work is waited for first. Tensors made before
        keep their computed values; pending ones are no longer synced (a value read still computes them)."""
        try:
            self.wait()
        except Exception:      # a launch that failed: its error is raised at its outputs' reads, and
            pass               # reset drops them (an asynchronous device reports it at the wait too)
        self.log.clear()
        self._fresh()

    def wait(self) -> None:
        """Blocks until every launched execution has finished (`xlanb.wait()`)."""
        launched = [a for a in self.outstanding if isinstance(a, jax.Array) and not a.is_deleted()]
        self.outstanding.clear()
        self.outstanding_limit = 64
        if launched:
            jax.block_until_ready(launched)

    def jax_device(self):
        """The PJRT device xla:0 runs on, for the configured platform (read at each call)."""
        platform = config().platform or None
        devices = self._jax_devices.get(platform)
        if devices is None:
            if self.host_memory is None:
                fix_field("host_memory_reuse", "glibc's malloc is set once, before XLA's threads allocate")
                self.host_memory = config().host_memory_reuse and cpu_only(platform) and reuse_host_memory()
            # this process's devices: across processes (jax.distributed) devices()[0] may be another's
            devices = self._jax_devices[platform] = jax.local_devices(backend=platform)
        return devices[0]

    def count_devices(self) -> bool:
        """Sets and returns `several_devices`: more than one device across the process(es)."""
        self.several_devices = jax.device_count(config().platform or None) > 1
        return self.several_devices

    def status(self) -> dict:
        """What a status bar shows: {"mode", "cache_size"} (`pending_nodes` comes from capture)."""
        return {"mode": "eager" if self.eager else "lazy", "cache_size": len(self.cache)}

    # --- the hook API (docs/architecture.md) -------------------------------------------
    def subscribe(self, listener) -> None:
        """`listener(event)` is called for every event, on the thread that emitted it."""
        self.log.subscribe(listener)

    def unsubscribe(self, listener) -> None:
        self.log.unsubscribe(listener)

    @contextlib.contextmanager
    def recording_texts(self):
        """While active, Compile events carry StableHLO, optimized HLO, cost and memory analyses
        (the notebook report asks for them; XLANB_DEBUG >= 4 does too)."""
        self.want_texts += 1
        try:
            yield
        finally:
            self.want_texts -= 1

    @contextlib.contextmanager
    def recording_locations(self):
        """While active, every recorded op remembers the user's source line (slower)."""
        previous = self.track_locations
        self.track_locations = True
        try:
            yield
        finally:
            self.track_locations = previous or config().debug_nans


    # --- fault injection (tests only) ---------------------------------------------------
    def inject_fault(self, stage: str, kind: str) -> None:
        """The next time `stage` runs it raises a fault of `kind` instead: "error" (RuntimeError),
        "interrupt" (KeyboardInterrupt) or "oom" (the device's out-of-memory error). For the
        tests that check nothing is lost when a stage fails; reset() disarms it."""
        if stage not in FAULT_STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(FAULT_STAGES)}")
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; kinds are {', '.join(FAULT_KINDS)}")
        self.faults[stage] = kind
        if stage == "capture" and self.arm_capture_fault is not None:
            self.arm_capture_fault()

    def fault(self, stage: str) -> None:
        """Raises the fault armed for `stage`, once (callers check `if self.faults` first)."""
        kind = self.faults.pop(stage, None)
        if kind is None:
            return
        if kind == "error":
            error = RuntimeError(f"injected fault in {stage}")
        elif kind == "interrupt":
            error = KeyboardInterrupt()
        else:
            error = jax.errors.JaxRuntimeError(
                f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes (injected in {stage})")
        raise error

    arm_capture_fault = None    # set by capture's install step: capture has no per-op check to spare
    new_cache = None            # set by runtime/cache.py: CompiledCache, the executable cache's class


FAULT_STAGES = ("capture", "lowering", "compilation", "execution", "transfer", "report")
FAULT_KINDS = ("error", "interrupt", "oom")


def note_stage(error: BaseException, text: str) -> None:
    """Adds one line saying where in xlanb `error` happened and what to do; the error keeps its
    type (a KeyboardInterrupt stays one) and only the innermost stage adds a line."""
    if getattr(error, "_xlanb_stage", False):
        return
    try:
        error._xlanb_stage = True
    except AttributeError:
        return
    if isinstance(error, KeyboardInterrupt):
        advice = "interrupted; nothing pending was lost: run the cell again to retry"
    elif "RESOURCE_EXHAUSTED" in str(error) or isinstance(error, MemoryError):
        advice = ("the device ran out of memory; nothing pending was lost: free tensors you no longer need "
                  "(del x), use a smaller batch, or split the graph with xlanb.sync(), then run again")
    else:
        advice = "nothing pending was lost: fix the cause and run again (xlanb.reset() drops pending work)"
    error.add_note(f"xlanb: raised while {text}; {advice}")


_runtime = Runtime()


def runtime_state() -> Runtime:
    """The one Runtime of this process."""
    return _runtime


emit = _runtime.log.emit     # the log object lives as long as the process: safe to bind


# XLA's CPU client allocates each execution's temporaries with posix_memalign on its worker threads
# (W7's replayed step: 113 MiB). glibc serves an allocation that large on a thread other than the
# main one with a fresh mmap each time (a thread arena's heaps stop at 64 MiB) and gives it back at
# the free, so the kernel maps and zeroes every page again at each execution: W7's replayed step
# took 29,000 page faults and 143 ms; from one heap that keeps its free memory, none and 113 ms
# (docs/performance.md). mallopt's parameters: every thread that has not allocated yet shares the
# main arena (M_ARENA_MAX 1), which takes no allocation from mmap (M_MMAP_MAX 0) and keeps up to
# 1 GiB free at its top (M_TRIM_THRESHOLD).
_M_TRIM_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -4, -8
HOST_MALLOC = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 1 << 30))


def cpu_only(platform: str | None) -> bool:
    """Whether xla:0 will be a CPU and JAX has not started its backends yet (their threads would keep
    the arenas they have): `platform` "cpu", or JAX's default where no TPU or GPU plugin is installed
    (an accelerator's host threads are left to glibc's defaults)."""
    from jax._src import xla_bridge
    if platform not in (None, "cpu") or xla_bridge.backends_are_initialized():
        return False
    if platform == "cpu" or os.environ.get("JAX_PLATFORMS", "").strip() == "cpu":
        return True
    if importlib.util.find_spec("libtpu") is not None:
        return False
    plugins = any(importlib.metadata.entry_points(group="jax_plugins")) or importlib.util.find_spec("jax_plugins")
    return not plugins


def reuse_host_memory() -> bool:
    """Sets glibc's malloc as HOST_MALLOC says; whether it was set (False off glibc). Threads that
    have allocated already keep their arenas, so `Runtime.jax_device` calls it before JAX starts its
    backends, where `cpu_only` says xla:0 will be a CPU; XLANB_HOST_MEMORY_REUSE=0 leaves the
    allocator alone. Freed host memory stays in the process (a notebook gives it back after each
    cell: release_host_memory)."""
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        glibc = None
    if not glibc:
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return mallopt is not None and all(mallopt(param, value) == 1 for param, value in HOST_MALLOC)


def release_host_memory() -> None:
    """Gives the heap's free pages back to the system (glibc's malloc_trim; 21 ms after W7's steps,
    340 MiB). With reuse_host_memory's settings freed host memory stays in the process, a large CPU
    tensor's too; the notebook calls this after each cell that ran on the device, so the steps of one
    cell reuse their temporaries and a freed CPU copy of a model does not stay."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)

