"""`python -m xlanb.selfcheck`: does xlanb work on this machine, and how fast?

For a person in front of a new GPU or TPU runtime (or a CPU). On the device xlanb runs on (the
platform JAX picks, or XLANB_PLATFORM), it runs one check per row and prints one table:

    versions, devices         what is installed and what JAX found
    training parity           3 SGD steps of a small MLP, lazy, against torch on the CPU
    eager op                  matmul + relu in eager mode against the CPU
    replayed step             xlanb.compile(step, replay=True): did it replay, and the same values?
    HF greedy tokens          a tiny Llama's greedy generate() against the CPU (needs transformers)
    W3 step, W4 step          the replayed training step's time against pure jitted JAX
    device memory             jax's memory_stats() of the device

then a line for each row that needs something done. `run()` returns the rows (plain data);
`render_text` and `render_json` are the two renderings; `%xla_selfcheck` shows the same table.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import statistics
import sys
import time
import traceback

import jax
import torch

from xlanb import hooks, metrics
from xlanb._requirements import installed, release
from xlanb.replay import compile as xla_compile
from xlanb.capture.modes import eager_mode_context
from xlanb.capture.realize import raise_deferred, sync
from xlanb.ir.precision import xla_precision
from xlanb.lower.torch_versions import float32_matmul_precision
from xlanb.report.format import format_bytes, format_ms
from xlanb.selfcheck import workloads as W
from xlanb.state import runtime_state

PARITY_ATOL = 1e-4          # max |xla - CPU| of losses, parameters and outputs in float32
RATIO_LIMIT = 2.0           # a replayed step slower than this many times pure JAX's is a FAIL
STATUSES = ("PASS", "FAIL", "ERROR", "SKIP")


@dataclasses.dataclass
class Row:
    """One check: its name, PASS | FAIL | ERROR | SKIP, what it saw, and what to do (may be empty)."""
    check: str
    status: str
    detail: str
    advice: str = ""
    data: dict = dataclasses.field(default_factory=dict)    # the numbers behind the detail; seconds taken


def ok(rows: list[Row]) -> bool:
    """Nothing FAILed or ERRORed."""
    return all(r.status in ("PASS", "SKIP") for r in rows)


# Helpers ---------------------------------------------------------------------------------------

def _numbers(version: str | None) -> tuple:
    return release(version or "")[:3]


def _max_abs(pairs) -> float:
    """The largest |a - b| over (xla tensor, CPU tensor) pairs."""
    return max(float((a.detach().cpu().double() - b.detach().double()).abs().max()) for a, b in pairs)


def _xla_device() -> torch.device:
    return runtime_state().device


def _jax_precision() -> str:
    """The matmul precision xlanb gives float32 products (torch's setting), in JAX's words."""
    return xla_precision(float32_matmul_precision()).lower()


def _precision_advice() -> str:
    """What to do when xla's float32 numbers differ from the CPU's."""
    find = "XLANB_DEBUG=3 prints each graph's IR to find the op; please report it with this table"
    now = float32_matmul_precision()
    if now == "highest":
        return ("torch's float32 matmul precision is 'highest' (full float32 products), so something else "
                f"differs: {find}")
    return (f"torch.get_float32_matmul_precision() is {now!r}, which xlanb maps to XLA's dot precision: 'high' and "
            "'medium' are 3 and 1 bfloat16 passes on a TPU, TF32 on an A100/H100. Call "
            "torch.set_float32_matmul_precision('highest') (xlanb reads it at each graph it builds: graphs compile "
            f"again at the new precision); if the numbers still differ, {find}")


def _replay_reasons(events_since: list) -> list[str]:
    from xlanb import events
    return [e.reason for e in events_since if isinstance(e, (events.ReplayMiss, events.NotReplayable))]


# The checks: each returns one Row ------------------------------------------------------------------

def check_versions(quick: bool) -> Row:
    v = {"xlanb": installed("xlanb") or "(not installed)", "torch": torch.__version__, "jax": jax.__version__,
         "jaxlib": installed("jaxlib"), "Python": sys.version.split()[0]}
    libtpu = installed("libtpu") or installed("libtpu-nightly")
    if libtpu:
        v["libtpu"] = libtpu
    # too old a torch, jax or Python stops `import xlanb` already (xlanb/_requirements.py)
    problem = ""
    if v["jaxlib"] and _numbers(v["jaxlib"]) < _numbers(v["jax"]):
        problem = f"jaxlib {v['jaxlib']} is older than jax {v['jax']}: pip install -U 'jaxlib=={v['jax']}'"
    detail = ", ".join(f"{k} {val}" for k, val in v.items())
    return Row("versions", "FAIL" if problem else "PASS", detail, problem, {"versions": v})


def check_devices(quick: bool) -> Row:
    platform_wanted = runtime_state().config.platform
    try:
        device = runtime_state().jax_device()
    except RuntimeError as error:
        return Row("devices", "FAIL", f"no {platform_wanted or 'default'} JAX device: {error}",
                   "set XLANB_PLATFORM (cpu, gpu, tpu) before importing xlanb, or install JAX's plugin: "
                   "pip install 'jax[cuda12]' (NVIDIA GPU) or 'jax[tpu]' (TPU)")
    devices = jax.devices(device.platform)
    kinds = sorted({d.device_kind for d in devices})
    detail = (f"{device.platform}: {len(devices)} device{'s' if len(devices) != 1 else ''} ({', '.join(kinds)}); "
              f"xla:0 is {device}")
    advice = ""
    if device.platform == "cpu" and platform_wanted == "cpu":
        advice = "XLANB_PLATFORM=cpu puts xla on the CPU: unset it to run on a GPU or TPU that JAX finds"
    elif device.platform == "cpu":
        advice = ("JAX found no GPU/TPU, so xla runs on the CPU: pip install 'jax[cuda12]' (NVIDIA GPU) or "
                  "'jax[tpu]' (TPU), then restart Python")
    return Row("devices", "PASS", detail, advice,
               {"platform": device.platform, "count": len(devices), "kinds": kinds})


def check_training_parity(quick: bool) -> Row:
    """3 SGD steps of a 32-64-10 MLP (batch 16), lazy with a sync per step, against torch on the CPU."""
    cpu = W.small_mlp()
    dev = copy.deepcopy(cpu).to(_xla_device())
    x, y = W.small_batch("cpu")
    xd, yd = x.to(_xla_device()), y.to(_xla_device())
    step_cpu, step_dev = W.sgd_step(cpu), W.sgd_step(dev)
    with eager_mode_context(False):
        for _ in range(3):
            loss_cpu, loss_dev = step_cpu(x, y), step_dev(xd, yd)
            sync()
    loss_diff = _max_abs([(loss_dev, loss_cpu)])
    param_diff = _max_abs(zip(dev.parameters(), cpu.parameters()))
    worst = max(loss_diff, param_diff)
    passed = worst <= PARITY_ATOL
    detail = (f"MLP 32-64-10, SGD, 3 lazy steps: loss {loss_dev.item():.6f} (CPU {loss_cpu.item():.6f}); "
              f"max |xla - CPU| loss {loss_diff:.1e}, parameters {param_diff:.1e} (tolerance {PARITY_ATOL:.0e})")
    return Row("training parity", "PASS" if passed else "FAIL", detail, "" if passed else _precision_advice(),
               {"loss_max_abs": loss_diff, "param_max_abs": param_diff, "tolerance": PARITY_ATOL})


def check_eager_op(quick: bool) -> Row:
    """relu(a @ b) in eager mode: each op compiled (once per shape) and run at once."""
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(8, 32, generator=g), torch.randn(32, 16, generator=g)
    runs = (metrics.metric_data("EagerOpExecuteTime") or (0,))[0]
    with eager_mode_context(True):
        out = torch.relu(torch.matmul(a.to(_xla_device()), b.to(_xla_device())))
    eager_runs = (metrics.metric_data("EagerOpExecuteTime") or (0,))[0] - runs
    diff = _max_abs([(out, torch.relu(a @ b))])
    passed = diff <= PARITY_ATOL and eager_runs >= 2
    detail = f"relu(matmul) of f32[8,32] x f32[32,16]: {eager_runs} eager executions; max |xla - CPU| {diff:.1e}"
    advice = ""
    if eager_runs < 2:
        advice = "the ops did not run eagerly (EagerOpExecuteTime did not count them): please report it"
    elif not passed:
        advice = _precision_advice()
    return Row("eager op", "PASS" if passed else "FAIL", detail, advice,
               {"max_abs": diff, "eager_executions": eager_runs})


def check_replayed_step(quick: bool) -> Row:
    """5 calls of the MLP step through xlanb.compile(replay=True): calls 3-5 replay, and give what the
    traced step (xlanb.compile) and torch on the CPU give."""
    cpu = W.small_mlp()
    traced, replayed = copy.deepcopy(cpu).to(_xla_device()), copy.deepcopy(cpu).to(_xla_device())
    x, y = W.small_batch("cpu")
    xd, yd = x.to(_xla_device()), y.to(_xla_device())
    step_cpu = W.sgd_step(cpu)
    step_traced = xla_compile(W.sgd_step(traced), name="selfcheck_traced")
    step_replayed = xla_compile(W.sgd_step(replayed), name="selfcheck_replayed", replay=True)
    hits, mark = metrics.counter_value("ReplayHit") or 0, hooks.mark()
    with eager_mode_context(False):
        for _ in range(5):
            loss_cpu, loss_traced, loss_replayed = step_cpu(x, y), step_traced(xd, yd), step_replayed(xd, yd)
        sync(wait=True)
    hits = (metrics.counter_value("ReplayHit") or 0) - hits
    vs_traced = _max_abs([(loss_replayed, loss_traced.cpu())]
                         + [(p, q.cpu()) for p, q in zip(replayed.parameters(), traced.parameters())])
    vs_cpu = _max_abs([(loss_replayed, loss_cpu)] + list(zip(replayed.parameters(), cpu.parameters())))
    did_replay = step_replayed.replayed == 3 and hits == 3
    passed = did_replay and vs_traced <= PARITY_ATOL and vs_cpu <= PARITY_ATOL
    detail = (f"MLP step, 5 calls: {step_replayed.traced} traced, {step_replayed.replayed} replayed "
              f"(ReplayHit +{hits}); max |replayed - traced| {vs_traced:.1e}, |replayed - CPU| {vs_cpu:.1e}")
    advice = ""
    if not did_replay:
        reasons = _replay_reasons(hooks.since(mark))
        advice = ("the step did not replay" + (f": {reasons[0]}" if reasons else "") +
                  "; docs/replay.md lists what a replayed step may not do. Please report it with this table")
    elif not passed:
        advice = _precision_advice()
    return Row("replayed step", "PASS" if passed else "FAIL", detail, advice,
               {"replayed": step_replayed.replayed, "replay_hits": hits, "vs_traced_max_abs": vs_traced,
                "vs_cpu_max_abs": vs_cpu})


@contextlib.contextmanager
def _quiet_transformers(transformers):
    """HF's warnings off for the block (its verbosity is global: put back afterwards)."""
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(level)


def check_hf_tokens(quick: bool) -> Row:
    """A tiny LlamaForCausalLM from a config (random weights, no download): 8 greedy tokens with a
    static cache on xla, against the same model on the CPU."""
    try:
        import transformers
    except ImportError:
        return Row("HF greedy tokens", "SKIP", "transformers is not installed: pip install transformers")
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(3, 1000, (1, 8), generator=torch.Generator().manual_seed(1))
    kw = dict(max_new_tokens=8, do_sample=False, pad_token_id=0, cache_implementation="static")
    with _quiet_transformers(transformers), torch.no_grad():
        ref = model.generate(ids, **kw)[0, 8:]
        model.to(_xla_device())
        with eager_mode_context(False):
            out = model.generate(ids.to(_xla_device()), **kw)[0, 8:].cpu()
    same = torch.equal(out, ref)
    detail = (f"tiny Llama (2 layers, d 64), 8 greedy tokens, static cache: "
              f"{'the same tokens as the CPU' if same else f'{out.tolist()} on xla, {ref.tolist()} on the CPU'}")
    advice = "" if same else ("the tokens differ from the CPU's (a near tie between two logits can flip a greedy "
                              "token): " + _precision_advice())
    return Row("HF greedy tokens", "PASS" if same else "FAIL", detail, advice,
               {"tokens": out.tolist(), "cpu_tokens": ref.tolist(), "transformers": transformers.__version__})


def _interleaved(a, b, warmup: int, steps: int) -> tuple[float, float]:
    """Median seconds of a() and of b(), timed in turns so that a load on the machine hits both alike."""
    for _ in range(warmup):
        a()
        b()
    times_a, times_b = [], []
    for _ in range(steps):
        for f, times in ((a, times_a), (b, times_b)):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
    return statistics.median(times_a), statistics.median(times_b)


def _step_ratio(name: str, what: str, torch_setup, jax_step, steps: int) -> Row:
    """The replayed torch step (waited for each step) against the jitted JAX step on the same device."""
    step, *batch = torch_setup(_xla_device())
    replayed = xla_compile(step, name=f"selfcheck_{name}", replay=True)
    fallbacks = set(metrics.executed_fallback_ops())

    def xla_step():
        replayed(*batch)
        sync(wait=True)

    def jax_wait():
        jax_step().block_until_ready()
    with eager_mode_context(False), jax.default_matmul_precision(_jax_precision()):
        t_xla, t_jax = _interleaved(xla_step, jax_wait, warmup=3, steps=steps)
    ratio = t_xla / t_jax
    new_fallbacks = sorted(set(metrics.executed_fallback_ops()) - fallbacks)
    passed = ratio <= RATIO_LIMIT and replayed.replayed > 0
    detail = (f"{what}: xlanb {format_ms(t_xla * 1e3)}/step (replayed), JAX {format_ms(t_jax * 1e3)}/step: "
              f"{ratio:.2f}x (median of {steps})")
    advice = ""
    if replayed.replayed == 0:
        advice = "the step did not replay (docs/replay.md); please report it with this table"
    elif not passed:
        advice = (f"xlanb's step takes {ratio:.2f}x JAX's (limit {RATIO_LIMIT}x)"
                  + (f"; ops ran on the CPU (no lowering): {', '.join(new_fallbacks)}" if new_fallbacks else "")
                  + ": check that no other process uses the device or the CPU cores and run it again; "
                  "docs/performance.md has the reference numbers, and `make bench` in a source checkout "
                  "measures every workload")
    return Row(f"{name} step", "PASS" if passed else "FAIL", detail, advice,
               {"xlanb_ms": t_xla * 1e3, "jax_ms": t_jax * 1e3, "ratio": ratio, "steps": steps,
                "replayed": replayed.replayed, "fallbacks": new_fallbacks})


def check_w3(quick: bool) -> Row:
    device = runtime_state().jax_device()
    return _step_ratio("W3", "MLP 784-512-10, batch 64, SGD", W.w3_torch, W.w3_jax(device), steps=100)


def check_w4(quick: bool) -> Row:
    s = W.W4_QUICK if quick else W.W4
    what = (f"decoder 2 layers, d 256, 4 heads, seq {s['seq']}, batch {s['batch']}, AdamW"
            + (" (--quick; --full: seq 128, batch 8)" if quick else ""))
    device = runtime_state().jax_device()
    return _step_ratio("W4", what, lambda d: W.w4_torch(d, s), W.w4_jax(device, s), steps=5 if quick else 10)


def check_memory(quick: bool) -> Row:
    device = runtime_state().jax_device()
    stats = device.memory_stats()
    if not stats:
        return Row("device memory", "SKIP", f"not reported by the {device.platform.upper()} backend")
    used, limit, peak = (stats.get(k) for k in ("bytes_in_use", "bytes_limit", "peak_bytes_in_use"))
    detail = f"{format_bytes(used or 0)} in use"
    if limit:
        detail += f" of {format_bytes(limit)} ({100 * (used or 0) / limit:.1f}%)"
    if peak:
        detail += f", peak {format_bytes(peak)}"
    return Row("device memory", "PASS", detail + " (JAX's memory_stats())",
               data={k: stats[k] for k in ("bytes_in_use", "bytes_limit", "peak_bytes_in_use") if k in stats})


CHECKS = [("versions", check_versions), ("devices", check_devices), ("training parity", check_training_parity),
          ("eager op", check_eager_op), ("replayed step", check_replayed_step),
          ("HF greedy tokens", check_hf_tokens), ("W3 step", check_w3), ("W4 step", check_w4),
          ("device memory", check_memory)]


# Running and rendering ----------------------------------------------------------------------------

def default_quick() -> bool:
    """--quick is the default on a CPU (a smaller W4, so the whole check takes under a minute)."""
    try:
        return runtime_state().jax_device().platform == "cpu"
    except RuntimeError:
        return True


def run(quick: bool | None = None) -> list[Row]:
    """Runs every check on xlanb's device and returns one Row each. A check that raises gives an
    ERROR row (its type and message) and the others still run. torch's CPU random state and the
    eager mode are as they were afterwards."""
    quick = default_quick() if quick is None else quick
    rows = []
    with torch.random.fork_rng(devices=[]):
        for name, check in CHECKS:
            t0 = time.perf_counter()
            try:
                row = check(quick)
            except Exception as error:          # a check's failure is a row, not the end of the run
                message = str(error).strip().splitlines()[0] if str(error).strip() else ""
                row = Row(name, "ERROR", f"{type(error).__name__}: {message}"[:300],
                          "this check raised an exception: `python -m xlanb.selfcheck --traceback` prints where; "
                          "please report it with this table", {"traceback": traceback.format_exc()})
                with contextlib.suppress(RuntimeError):
                    raise_deferred()            # an error it left for the next sync is not the next check's
            row.data["seconds"] = round(time.perf_counter() - t0, 2)
            rows.append(row)
    return rows


def advice_lines(rows: list[Row]) -> list[str]:
    """What to do: one line per row that has advice (every FAIL and ERROR row has)."""
    return [f"{r.check} ({r.status}): {r.advice}" for r in rows if r.advice]


def render_text(rows: list[Row], seconds: float | None = None) -> str:
    """The table (check | result | detail), then what to do, then a summary line."""
    head = ("check", "result", "detail")
    widths = [max([len(head[0])] + [len(r.check) for r in rows]), max([len(head[1])] + [len(r.status) for r in rows])]
    lines = [f"{head[0]:<{widths[0]}}  {head[1]:<{widths[1]}}  {head[2]}",
             f"{'-' * widths[0]}  {'-' * widths[1]}  {'-' * 6}"]
    lines += [f"{r.check:<{widths[0]}}  {r.status:<{widths[1]}}  {r.detail}" for r in rows]
    todo = advice_lines(rows)
    if todo:
        lines += ["", "what to do:"] + [f"- {line}" for line in todo]
    counts = ", ".join(f"{sum(r.status == s for r in rows)} {s}" for s in STATUSES if any(r.status == s for r in rows))
    took = f" in {seconds:.1f} s" if seconds is not None else ""
    lines += ["", f"xlanb selfcheck: {counts}{took}: " + ("OK" if ok(rows) else "something is wrong (above)")]
    return "\n".join(lines)


def render_json(rows: list[Row], seconds: float | None = None) -> str:
    return json.dumps({"ok": ok(rows), "seconds": seconds, "rows": [dataclasses.asdict(r) for r in rows],
                       "advice": advice_lines(rows)}, indent=1)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code (0: nothing FAILed or ERRORed, 1 otherwise)."""
    parser = argparse.ArgumentParser(prog="python -m xlanb.selfcheck",
                                     description="Does xlanb work on this machine, and how fast?")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", default=None,
                      help="W4 at seq 64, batch 4, 5 timed steps (the default on a CPU)")
    size.add_argument("--full", action="store_true", help="W4 at seq 128, batch 8, 10 timed steps "
                      "(the default on a GPU or TPU)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    parser.add_argument("--traceback", action="store_true", help="print the traceback of each ERROR row")
    args = parser.parse_args(argv)
    quick = True if args.quick else False if args.full else None
    t0 = time.perf_counter()
    rows = run(quick)
    seconds = round(time.perf_counter() - t0, 1)
    print(render_json(rows, seconds) if args.json else render_text(rows, seconds))
    if args.traceback:
        for r in rows:
            if "traceback" in r.data:
                print(f"\n{r.check}:\n{r.data['traceback']}", file=sys.stderr)
    return 0 if ok(rows) else 1
