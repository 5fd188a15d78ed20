"""Where a replayed step's host time goes: each phase of `xlanb.compile(step, replay=True)`'s call,
timed around the functions replay/function.py calls, against pure JAX's jitted step dispatch.

    python bench/replay_phases.py [W3|W4] [--steps N]

A phase is timed with the previous step waited for (so the launch does not queue behind it), as
`make bench`'s "replayed call alone" row is. Prints microseconds per call (medians); the phase
timers add ~1 us each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402

import xlanb  # noqa: E402
from xlanb.replay import function as replay  # noqa: E402
from xlanb.runtime import executor  # noqa: E402

PHASES = {"guard": (replay, "guard"), "gather": (replay, "gather"), "old grads": (replay, "_old_grads"),
          "launch": (executor, "call"), "rebind": (replay, "rebind"), "event": (replay, "emit")}


def timed_phases() -> dict:
    """Wraps each phase's function where replay/function.py looks it up; returns {phase: [ns, ...]}."""
    samples = {name: [] for name in PHASES}
    for name, (module, attr) in PHASES.items():
        inner = getattr(module, attr)

        def wrapper(*args, _inner=inner, _out=samples[name], **kwargs):
            t0 = time.perf_counter_ns()
            try:
                return _inner(*args, **kwargs)
            finally:
                _out.append(time.perf_counter_ns() - t0)
        setattr(module, attr, wrapper)
    return samples


def xlanb_step(workload: str, steps: int) -> tuple[dict, list]:
    from models import w3_setup, w4_setup
    body = w3_setup("xla") if workload == "W3" else w4_setup("xla", schedule_outside=True)[0]
    f = xlanb.compile(body, name="train_step", replay=True)
    for _ in range(4):
        f()
        xlanb.sync(wait=True)
    assert f.replayed >= 1, "the step did not replay"
    samples = timed_phases()
    calls = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        f()
        calls.append(time.perf_counter_ns() - t0)
        xlanb.sync(wait=True)
    for values in samples.values():
        del values[:-steps]
    return samples, calls


def jax_dispatch(workload: str, steps: int) -> list:
    """Host time of pure JAX's jitted W3 step call (the previous step waited for)."""
    if workload != "W3":
        return []
    import jax_models as M
    from common import W3
    from jax_workloads import sgd_step
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = M.mlp_init(k1)
    x = jax.random.normal(k2, (W3["batch"], W3["d_in"]), jnp.float32)
    y = jax.random.randint(k3, (W3["batch"],), 0, W3["d_out"])
    step = jax.jit(sgd_step, donate_argnums=(0,))
    for _ in range(4):
        params, loss = step(params, x, y)
    loss.block_until_ready()
    out = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        params, loss = step(params, x, y)
        out.append(time.perf_counter_ns() - t0)
        loss.block_until_ready()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", default="W3", choices=("W3", "W4"))
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    samples, calls = xlanb_step(args.workload, args.steps)
    us = lambda v: f"{statistics.median(v) / 1e3:8.1f} us" if v else "       -"   # noqa: E731
    print(f"{args.workload} replayed call, median of {args.steps}: {us(calls)}")
    for name, values in samples.items():
        print(f"  {name:10s} {us(values)}")
    accounted = sum(statistics.median(v) for v in samples.values() if v)
    print(f"  {'other':10s} {(statistics.median(calls) - accounted) / 1e3:8.1f} us (the call's own Python)")
    dispatch = jax_dispatch(args.workload, args.steps)
    if dispatch:
        print(f"pure JAX jitted step, call alone: {us(dispatch)}")


if __name__ == "__main__":
    main()
