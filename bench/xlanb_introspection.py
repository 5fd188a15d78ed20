"""What xlanb's view of the runtime costs: W5 (graph size: trace, hash, key, lower, compile; the cell
report's build and HTML render) and the notebook hooks on a cell. Run through xlanb_workloads.py."""

import torch

import xlanb
from common import W5_LOWER_MAX, W5_SIZES, emit, median, perf
from models import w3_setup
from xlanb import events, hooks
from xlanb.capture.realize import pending_roots
from xlanb.ir.graph import build_graph
from xlanb.report import build_report, render_html


def chain(x, nodes: int):
    for _ in range(nodes // 2):
        x = x * 1.0001 + 0.5
    return x


def compile_and_report(x0, nodes: int) -> dict:
    """Syncs a pending chain with texts recorded; lower and compile times come from its Compile event
    (lower_ns times `executor.lower_graph`, compile_ns the XLA compile), then the report is timed."""
    y = chain(x0, nodes)
    with hooks.recording_texts():
        mark = hooks.mark()
        xlanb.sync(wait=True)
        evs = hooks.since(mark)
    c = next(e for e in evs if isinstance(e, events.Compile))
    t0 = perf()
    report = build_report(evs)
    t1 = perf()
    render_html(report)
    t2 = perf()
    del y
    return {"lower": c.lower_ns * 1e-9, "compile": c.compile_ns * 1e-9, "report_build": t1 - t0,
            "report_render": t2 - t1}


def w5():
    x0 = torch.rand(128, 128).to("xla")
    xlanb.sync(wait=True)
    compile_and_report(x0, 100)               # warms lowering, compiling and the report code
    metrics = {}
    for n in W5_SIZES:
        t0 = perf()
        y = chain(x0, n)
        t1 = perf()
        graph = build_graph(pending_roots(), f"w5_{n}")
        t2 = perf()
        hash(graph.key)
        t3 = perf()
        found = {"trace": t1 - t0, "key": t2 - t1, "hash": t3 - t2}
        del y, graph
        xlanb.sync()                          # nothing live: drops the trace
        if n <= W5_LOWER_MAX:
            found.update(compile_and_report(x0, n))
        metrics.update({f"{k}_{n // 1000}k": v for k, v in found.items()})
    emit("W5", "xlanb", metrics)


CELLS = {"eager_op": "y = x + 1\nxlanb.wait()", "compiled_step": "loss = step()\nxlanb.wait()"}


def notebook():
    """The same cells in one in-process IPython shell, with `%load_ext xlanb` and without it (eager
    mode both times, so the only difference is the hooks and the report), in alternating blocks."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    shell = InteractiveShell.instance()
    shell.run_cell("import torch, xlanb\nx = torch.rand(128, 128).to('xla')", store_history=True)
    shell.user_ns["step"] = xlanb.compile(w3_setup("xla"), name="train_step")
    times = {(cell, loaded): [] for cell in CELLS for loaded in (True, False)}
    for block in range(4):
        for loaded in (True, False):
            shell.run_cell("%load_ext xlanb" if loaded else "%unload_ext xlanb", store_history=False)
            xlanb.eager_mode(True)
            for cell, code in CELLS.items():
                for i in range(12):
                    with capture_output():
                        t0 = perf()
                        result = shell.run_cell(code, store_history=True)
                        dt = perf() - t0
                    if result.error_in_exec is not None:
                        raise result.error_in_exec
                    if block > 0 and i >= 2:  # block 0 and each block's first two cells warm up
                        times[cell, loaded].append(dt)
    metrics = {}
    for cell in CELLS:
        on, off = median(times[cell, True]), median(times[cell, False])
        metrics.update({f"{cell}_loaded": on, f"{cell}_unloaded": off, f"{cell}_hooks": on - off})
    emit("notebook", "xlanb", metrics)
