"""Steps with torch_xla's semantics: sync / mark_step with step closures, torch_xla.compile and
step, optimizer_step, the RNG seed, xm.save and wait_device_ops.

A step closure (`xm.add_step_closure`) runs after the step that was pending when it was added has
been launched, at the next `torch_xla.sync()` (or `xm.mark_step()`, the end of a `torch_xla.compile`
body, an `MpDeviceLoader` step), in the order closures were added; tensors it reads are computed
by then, so reading them runs nothing more. `run_async=True` closures run in order on one
background thread, as torch_xla's AsyncClosureHandler does; one that raises stops the async
closures after it, and the next sync raises a RuntimeError from its exception.
"""

from __future__ import annotations

import concurrent.futures
import functools
import weakref

import torch

from xlanb._config import set_config
from xlanb.capture import modes, mutations, realize, rng
from xlanb.compat import devices
from xlanb.state import runtime_state

_rt = runtime_state()          # the queued closures and async errors are the Runtime's (reset() clears them)
_async_runner: list = []       # the one background thread's executor, made on first use (a resource, not state)
# f -> {(name, full_graph, max_different_graphs): xlanb's compiled f}: torch_xla counts a function's
# graphs per function, so compiling the same function again shares its graph count
_compiled_functions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def add_step_closure(closure, args: tuple = (), run_async: bool = False) -> None:
    """Runs `closure(*args)` once the current step has been launched (at the next sync)."""
    if not callable(closure):
        raise TypeError(f"xm.add_step_closure takes a callable, got {type(closure).__name__}")
    (_rt.async_step_closures if run_async else _rt.step_closures).append((closure, tuple(args)))


def run_step_closures() -> None:
    """The closures queued so far: async ones handed to the background thread, then the others
    here, in the order they were added (a closure that adds one queues it for the next step)."""
    if _rt.async_step_errors:
        error = _rt.async_step_errors[0]
        _rt.async_step_errors.clear()
        _rt.async_step_closures.clear()
        raise RuntimeError(f"an asynchronous step closure raised {type(error).__name__}: {error}") from error
    if _rt.async_step_closures:
        pending = list(_rt.async_step_closures)
        _rt.async_step_closures.clear()
        if not _async_runner:
            _async_runner.append(concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="xla_step_closures"))
        for closure, args in pending:
            _async_runner[0].submit(_run_async, closure, args, _rt.async_step_errors)
    if _rt.step_closures:
        pending = list(_rt.step_closures)
        _rt.step_closures.clear()
        for closure, args in pending:
            closure(*args)


def _run_async(closure, args, errors: list) -> None:
    """On the background thread; `errors` is the Runtime's list when the closure was queued (after a
    reset() its failure is not raised into the fresh runtime)."""
    if errors:                   # an earlier closure failed: the rest do not run
        return
    try:
        closure(*args)
    except Exception as error:   # kept for the main thread: raised at its next sync
        errors.append(error)


def wait_async_closures() -> None:
    """Blocks until every async step closure submitted so far has run."""
    if _async_runner:
        _async_runner[0].submit(lambda: None).result()


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    """`torch_xla.sync()` / `xm.mark_step()`: launches the pending graph of all live tensors, then
    runs the step closures. `reset_scope` is accepted and has no effect (xlanb keeps no IR scope)."""
    del reset_scope
    realize.sync(wait=bool(wait), cause="torch_xla.sync")
    run_step_closures()


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    sync(wait, reset_scope)


def wait_device_ops(devices: list | None = None) -> None:
    """Blocks until every launched execution has finished (all devices: xlanb has one per process)."""
    del devices
    realize.wait()


class _Compiled:
    """What `torch_xla.compile()` returns without a function: a context manager and a decorator,
    over xlanb.compile, whose end runs the step closures (torch_xla's compile ends with a sync)."""

    def __init__(self, name, full_graph, max_different_graphs):
        self.name, self.full_graph, self.max_different_graphs = name, full_graph, max_different_graphs
        self._inner = modes.compile(name=name, full_graph=full_graph, max_different_graphs=max_different_graphs)

    def __enter__(self):
        return self._inner.__enter__()

    def __exit__(self, *exc):
        result = self._inner.__exit__(*exc)
        if exc[0] is None:
            run_step_closures()
        elif issubclass(exc[0], Exception):
            sync()                 # torch_xla syncs in a `finally`: what the body traced still runs
        return result

    def __call__(self, f):
        return compile(f, full_graph=self.full_graph, name=self.name, max_different_graphs=self.max_different_graphs)


def compile(f=None, full_graph: bool = False, name: str | None = None, max_different_graphs: int | None = None,
            custom_compile_options: dict | None = None):
    """`torch_xla.compile`: `f` traced as one graph (xlanb.compile), step closures run after it.
    `custom_compile_options` (XLA flag overrides) is not supported: only None or {} is accepted."""
    if custom_compile_options:
        raise NotImplementedError("torch_xla.compile(custom_compile_options=...) is not supported by xlanb.compat: "
                                  "set XLA flags with the XLA_FLAGS environment variable before the process starts")
    if f is None:
        return _Compiled(name, full_graph, max_different_graphs)
    compiled = _compiled(f, name, full_graph, max_different_graphs)

    @functools.wraps(f)
    def run(*args, **kwargs):
        try:
            out = compiled(*args, **kwargs)
        except Exception:
            sync()                 # torch_xla syncs in a `finally`: what the body traced still runs
            raise
        run_step_closures()
        return out
    return run


def _compiled(f, name, full_graph, max_different_graphs):
    """xlanb's compiled `f`, one per function and settings (a new one for what cannot be weakly referenced)."""
    key = (name, full_graph, max_different_graphs)
    try:
        per_function = _compiled_functions.setdefault(f, {})
    except TypeError:
        return modes.compile(f, name=name, full_graph=full_graph, max_different_graphs=max_different_graphs)
    if key not in per_function:
        ref = weakref.ref(f)             # the cache must not keep f alive

        def call(*args, **kwargs):
            return ref()(*args, **kwargs)
        per_function[key] = modes.compile(call, name=name or getattr(f, "__name__", "compiled"), full_graph=full_graph,
                                          max_different_graphs=max_different_graphs)
    return per_function[key]


def step():
    """`torch_xla.step()`: `with torch_xla.step():` traces its body as one graph."""
    return compile()


def _fetch_gradients(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p.grad for group in optimizer.param_groups for p in group["params"]
            if isinstance(p, torch.Tensor) and p.grad is not None]


def reduce_gradients(optimizer: torch.optim.Optimizer, groups=None, pin_layout: bool = True) -> None:
    """Averages the optimizer's gradients over the replicas (`xmp.spawn` processes); nothing on one."""
    count = devices.world_size()
    if count > 1:
        from xlanb.compat import collectives
        collectives.all_reduce(collectives.REDUCE_SUM, _fetch_gradients(optimizer), scale=1.0 / count, groups=groups)


def optimizer_step(optimizer: torch.optim.Optimizer, barrier: bool = False, optimizer_args: dict | None = None,
                   groups=None, pin_layout: bool = True):
    """`xm.optimizer_step`: gradients averaged over the replicas, `optimizer.step(**optimizer_args)`,
    then a sync when `barrier` is True. Returns what optimizer.step returned."""
    reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
    loss = optimizer.step(**(optimizer_args or {}))
    if barrier:
        sync()
    return loss


def optimization_barrier_(tensors: list[torch.Tensor]) -> None:
    """`xm.optimization_barrier_`: the xla tensors pass through one XLA optimization barrier (in place),
    so XLA moves no computation across this point; CPU tensors are left as they are."""
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"xm.optimization_barrier_ takes a list of tensors, got a {type(t).__name__}")
    mutations.optimization_barrier_(tensors)


def set_rng_state(seed: int, device=None) -> None:
    """`xm.set_rng_state(seed)`: seeds the device RNG (xlanb.manual_seed)."""
    del device
    rng.manual_seed(int(seed))


def get_rng_state(device=None) -> int:
    """`xm.get_rng_state()`: the current RNG state as an int; `set_rng_state` of it restores it exactly.
    (xlanb's state is a threefry key; the int is its two 32-bit words. Reading it runs the RNG's
    pending update, a small graph, when random ops ran since the last sync.)"""
    del device
    hi, lo = (int(w) for w in rng.get_state().cpu().to(torch.int64).tolist())
    return (hi << 32) | lo


def manual_seed(seed: int, device=None) -> None:
    set_rng_state(seed, device)


def save(data, file_or_path, master_only: bool = True, global_master: bool = False) -> None:
    """`xm.save`: `torch.save` of a copy of `data` whose xla tensors are CPU tensors (so a later
    `torch.load` gives CPU data), written by the master ordinal only unless `master_only=False`."""
    if not master_only or devices.is_master_ordinal(local=not global_master):
        torch.save(realize.tree_to_cpu(data), file_or_path)


def step_marker(device: str = "", devices_=None, wait: bool = True, reset_scope: bool = True) -> None:
    """`_XLAC._xla_step_marker`: the end of a step (a sync with its closures)."""
    sync(wait=wait)


def initialize_cache(path: str, readonly: bool = False) -> None:
    """`xr.initialize_cache`: the persistent compilation cache in `path` (xlanb's cache_dir).
    `readonly` is accepted and has no effect: JAX's disk cache has no read-only mode."""
    del readonly
    set_config(cache_dir=str(path), persistent_cache=True)


def cached_graph_count() -> int:
    """Executables in the in-memory cache (`xr.get_num_cached_compilation_graph`)."""
    return len(_rt.cache)
