"""The workloads in ordinary PyTorch (bench/models.py), run on xlanb's xla device.

Usage: python xlanb_workloads.py W1|W1torch|W1replay|W2|W3|W3compile|W3torch|W3replay|W4|W4compile|W4torch|W4replay|W5|notebook
(W5 and the notebook cells are in xlanb_introspection.py; this script dispatches to them).
"""

import os
import sys

os.environ.setdefault("XLANB_PERSISTENT_CACHE", "0")     # first steps include a real compile

import torch  # noqa: E402

import xlanb  # noqa: E402
from common import W2_OPS, W3_STEPS, W4_STEPS, emit, median, perf, rss_bytes, timeit  # noqa: E402
from models import w1_chain, w2_ops, w3_setup, w4_setup  # noqa: E402
from xlanb import events, hooks  # noqa: E402
from xlanb.capture.realize import pending_roots  # noqa: E402
from xlanb.ir.graph import build_graph  # noqa: E402
from xlanb.runtime.executor import lower_graph  # noqa: E402

MIB = 1024 * 1024


def compiles() -> int:
    return xlanb.metrics.counter_value("UncachedCompile") or 0


def w1():
    x0 = torch.rand(128, 128).to("xla")
    xlanb.sync(wait=True)
    t0 = perf()
    y = w1_chain(x0)
    xlanb.sync(wait=True)                     # first trace + sync + wait: compile included
    first = perf() - t0
    del y
    traces = []
    for _ in range(7):
        t0 = perf()
        y = w1_chain(x0)
        traces.append(perf() - t0)
        del y
        xlanb.sync()                          # nothing live is pending: drops the trace
    keep = []

    def step():
        keep[:] = [w1_chain(x0)]
        xlanb.sync(wait=True)
    cached = timeit(step, n=50, warmup=5)
    y = w1_chain(x0)                          # lowering alone: the pending chain's graph
    graph = build_graph(pending_roots(), "w1_chain")
    lowers = timeit(lambda: lower_graph(graph), n=5, warmup=1)
    del y
    xlanb.sync()
    emit("W1", "xlanb", {"first_call": first, "trace_per_op": median(traces) / 1000, "cached_step": median(cached),
                         "lower_1000": median(lowers)})


def w2():
    x, w = torch.rand(128, 128).to("xla"), (torch.rand(128, 128) / 64).to("xla")
    xlanb.sync(wait=True)
    with xlanb.eager_mode_context(True):
        per_run = timeit(lambda: w2_ops(x, w, xlanb.wait), n=20, warmup=3)   # forced: wait after each op
    emit("W2", "xlanb", {"per_op": median(per_run) / W2_OPS})


def device_bytes(step) -> dict:
    """Runs `step` once more, compiled afresh with XLA's analyses recorded: the memory analysis of its
    largest graph (alias bytes are the donated buffers that outputs reuse)."""
    xlanb.runtime_state().cache.clear()
    with hooks.recording_texts():
        mark = hooks.mark()
        step()
        xlanb.sync(wait=True)
        compiled = [e for e in hooks.since(mark) if isinstance(e, events.Compile)]
    memory = dict(max(compiled, key=lambda c: c.nodes).memory)
    return {f"device_{k}": memory.get(f"{k}_size_in_bytes", 0) for k in ("argument", "output", "temp", "alias")}


def w1_replay():
    x0 = torch.rand(128, 128).to("xla")
    replayed("W1_replay", lambda: w1_chain(x0), 50)


def w4_replay():
    train, schedule = w4_setup("xla", schedule_outside=True)
    replayed("W4_replay", train, W4_STEPS, after=schedule)


def xlanb_compiled(body):
    return xlanb.compile(body, name="train_step")


def xlanb_replayed(body):
    return xlanb.compile(body, name="train_step", replay=True)


def replayed(workload: str, body, steps: int, after=None):
    """A step through `xlanb.compile(body, replay=True)`: first step, steady step (wait per step),
    host time of the call alone (the previous step waited for), recompiles after step 2, calls
    replayed; `after` (a scheduler's step) runs outside the replayed function."""
    f, step, first = first_step(body, xlanb_replayed)
    if after is not None:
        after()
    step()
    after_two = compiles()
    times, hosts = [], []
    for _ in range(steps + 2):
        t0 = perf()
        f()
        hosts.append(perf() - t0)
        if after is not None:
            after()
        xlanb.sync(wait=True)
        times.append(perf() - t0)
    emit(workload, "xlanb", {"first_step": first, "steady_step": median(times[2:]), "host": median(hosts[2:]),
                             "recompiles_after_2": compiles() - after_two, "replayed": f.replayed})


def first_step(body, wrap=None):
    """(body, step, seconds of the first step): the training step, wrapped (`xlanb.compile`,
    `torch.compile`) or lazy, where a step is the body then `xlanb.sync(wait=True)`; the first one
    compiles."""
    if wrap is not None:
        body = wrap(body)
    xlanb.sync(wait=True)

    def step():
        body()
        xlanb.sync(wait=True)
    t0 = perf()
    step()
    return body, step, perf() - t0


def w3(compiled: bool):
    body, step, first = first_step(w3_setup("xla"), xlanb_compiled if compiled else None)
    rss = {1: rss_bytes()}
    steps = 1000 if not compiled else W3_STEPS + 4
    times = []
    for i in range(2, steps + 1):
        t0 = perf()
        step()
        times.append(perf() - t0)
        if i in (10, 100, 1000):
            rss[i] = rss_bytes()
        if i == 2:
            after_two = compiles()
    metrics = {"first_step": first, "steady_step": median(times[2:2 + W3_STEPS]),
               "recompiles_after_2": compiles() - after_two}
    if not compiled:
        t0 = perf()                           # sync per step, no wait: the next trace overlaps execution
        for _ in range(W3_STEPS):
            body()
            xlanb.sync()
        xlanb.wait()
        metrics["steady_no_wait"] = (perf() - t0) / W3_STEPS
        metrics.update({f"rss_{i}": v / MIB for i, v in rss.items()})
        metrics.update(device_bytes(body))
    emit("W3_compile" if compiled else "W3", "xlanb", metrics)


def w4(compiled: bool):
    body, step, first = first_step(w4_setup("xla"), xlanb_compiled if compiled else None)
    step()
    after_two = compiles()
    times = timeit(step, n=W4_STEPS, warmup=1)
    emit("W4_compile" if compiled else "W4", "xlanb",
         {"first_step": first, "steady_step": median(times), "recompiles_after_2": compiles() - after_two})


def torch_compiled(fn):
    """`fn` through torch.compile(backend="xlanb"): each call records its FX graphs as lazy macro-nodes."""
    return torch.compile(fn, backend="xlanb")


def w1_torch_compile():
    x0 = torch.rand(128, 128).to("xla")
    xlanb.sync(wait=True)
    chain = torch_compiled(w1_chain)
    t0 = perf()
    y = chain(x0)
    xlanb.sync(wait=True)                     # dynamo capture + lowering + XLA compile included
    first = perf() - t0
    del y
    keep = []

    def step():
        keep[:] = [chain(x0)]
        xlanb.sync(wait=True)
    cached = timeit(step, n=50, warmup=5)
    emit("W1_torch_compile", "xlanb", {"first_call": first, "cached_step": median(cached)})


def train_torch_compile(workload: str, body, steps: int):
    """A training step `body` (forward, backward, optimizer) compiled whole by torch.compile."""
    _, step, first = first_step(body, torch_compiled)
    step()
    after_two = compiles()
    runs = xlanb.metrics.metric_data("ExecuteTime")[0]
    times = timeit(step, n=steps, warmup=1)
    per_step = (xlanb.metrics.metric_data("ExecuteTime")[0] - runs) / (steps + 1)
    emit(workload, "xlanb", {"first_step": first, "steady_step": median(times),
                             "recompiles_after_2": compiles() - after_two, "executables_per_step": per_step})


def introspection(name):
    import xlanb_introspection
    getattr(xlanb_introspection, name)()


{"W1": w1, "W1torch": w1_torch_compile, "W2": w2,
 "W3torch": lambda: train_torch_compile("W3_torch_compile", w3_setup("xla"), W3_STEPS),
 "W4torch": lambda: train_torch_compile("W4_torch_compile", w4_setup("xla"), W4_STEPS), "W3": lambda: w3(False), "W3compile": lambda: w3(True), "W4": lambda: w4(False),
 "W4compile": lambda: w4(True), "W1replay": w1_replay,
 "W3replay": lambda: replayed("W3_replay", w3_setup("xla"), W3_STEPS),
 "W4replay": w4_replay, "W5": lambda: introspection("w5"),
 "notebook": lambda: introspection("notebook")}[sys.argv[1]]()
