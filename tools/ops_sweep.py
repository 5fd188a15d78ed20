"""The OpInfo sweep: every op of torch's op_db on `xla`, compared with torch CPU.

    python tools/ops_sweep.py                 # full sweep; writes docs/ops.md and test-output/ops_sweep.json
    python tools/ops_sweep.py --ops add,sin   # some ops only (docs/ops.md is not rewritten)
    python tools/ops_sweep.py --check         # exit 1 if a target is missed or a sample fails unskipped
    python tools/ops_sweep.py --from-json test-output/ops_sweep.json   # rewrite docs/ops.md only

Samples run in worker processes (tests/ops/harness.py does the work): a crash or a hang
costs the op it happened in (it is retried once in a fresh worker), not the sweep. Forward
runs in float32, int64, bool, bfloat16 and complex64 (where the OpInfo supports the dtype),
backward in float32, with at most --samples samples per op, dtype and direction.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "ops"))

FWD_DTYPES = ("float32", "int64", "bool", "bfloat16", "complex64")
BWD_DTYPES = ("float32",)
SAMPLES = 32
TARGETS = {"forward": 95.0, "forward_no_fallback": 85.0, "backward": 90.0}
SAMPLE_TIMEOUT = 180.0          # seconds without a result before a worker is declared hung


# Worker ------------------------------------------------------------------------------------

def worker() -> None:
    """Reads `op<TAB>dtype<TAB>direction<TAB>limit` lines; writes one JSON line per result."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                  # whatever the ops print goes to stderr
    import warnings
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db
    import jax
    import harness
    import xlanb
    ops = {harness.full_name(o): o for o in op_db}
    watch = harness.Watch()
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        name, dtype, direction, limit = line.rstrip("\n").split("\t")
        harness.run_op(ops[name], dtype, direction, int(limit) or None, watch,
                       on_result=lambda r: proto.write(json.dumps(r.as_dict()) + "\n"))
        # thousands of graphs: keep the worker's memory flat (the disk cache keeps compiles cheap)
        xlanb.reset()
        jax.clear_caches()
        proto.write(json.dumps({"done": True}) + "\n")


class Worker:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, bufsize=1, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "tests" / "ops")})
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.get(600)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def get(self, timeout):
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise EOFError("worker exited")
        return json.loads(line)

    def send(self, task):
        self.proc.stdin.write("\t".join(map(str, task)) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait(10)
        except Exception:
            pass


def run_tasks(tasks, jobs: int, log) -> list[dict]:
    results: list[dict] = []
    todo: queue.Queue = queue.Queue()
    for t in tasks:
        todo.put(t)
    lock = threading.Lock()
    done = [0]

    def loop():
        w = Worker()
        while True:
            try:
                task = todo.get_nowait()
            except queue.Empty:
                break
            for attempt in (1, 2):        # a crash or hang is retried once in a fresh worker
                got: list[dict] = []
                try:
                    w.send(task)
                    while True:
                        msg = w.get(SAMPLE_TIMEOUT)
                        if msg.get("done"):
                            break
                        got.append(msg)
                    break
                except (queue.Empty, EOFError, BrokenPipeError) as e:
                    why = "timeout (hung)" if isinstance(e, queue.Empty) else "worker crashed"
                    w.kill()
                    w = Worker()
                    if attempt == 2:
                        got.append({"op": task[0], "dtype": task[1], "direction": task[2],
                                    "index": len(got), "status": "error", "kind": "", "fallback_ops": [],
                                    "cut": False, "message": f"{why} after {len(got)} samples (twice)",
                                    "seconds": 0})
            with lock:
                results.extend(got)
                done[0] += 1
                bad = [g for g in got if g["status"] in ("fail", "error")]
                log(f"[{done[0]}/{len(tasks)}] {task[0]} {task[1]} {task[2]}: "
                    f"{sum(g['status'] == 'pass' for g in got)}/{len(got)} pass"
                    + (f"  ({bad[0]['message'][:120]})" if bad else ""))
        w.kill()

    threads = [threading.Thread(target=loop) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# Report -------------------------------------------------------------------------------------

def totals(results: list[dict]) -> dict:
    """Sample counts; skipped samples count as not passing (one per skipped op/dtype/direction)."""
    out = {}
    for direction in ("fwd", "bwd"):
        rs = [r for r in results if r["direction"] == direction and r["status"] not in ("cpu_error", "n/a")]
        n = len(rs)
        passed = [r for r in rs if r["status"] == "pass"]
        out[direction] = {
            "samples": n,
            "pass": len(passed),
            "pass_no_fallback": sum(r["kind"] != "fallback" for r in passed),
            "lowered": sum(r["kind"] == "lowered" for r in passed),
            "decomposed": sum(r["kind"] == "decomposed" for r in passed),
            "fallback": sum(r["kind"] == "fallback" for r in passed),
            "fail": sum(r["status"] == "fail" for r in rs),
            "error": sum(r["status"] == "error" for r in rs),
            "skip": sum(r["status"] == "skip" for r in rs),
        }
    pct = lambda a, b: round(100.0 * a / b, 2) if b else 0.0  # noqa: E731
    out["forward_pct"] = pct(out["fwd"]["pass"], out["fwd"]["samples"])
    out["forward_no_fallback_pct"] = pct(out["fwd"]["pass_no_fallback"], out["fwd"]["samples"])
    out["backward_pct"] = pct(out["bwd"]["pass"], out["bwd"]["samples"])
    return out


def op_status(rs: list[dict]) -> str:
    rs = [r for r in rs if r["status"] not in ("cpu_error", "n/a")]
    if not rs:
        return "n/a"
    if any(r["status"] in ("fail", "error") for r in rs):
        return "failing"
    if all(r["status"] == "skip" for r in rs):
        return "skipped"
    passed = [r for r in rs if r["status"] == "pass"]
    if any(r["kind"] == "fallback" for r in passed):
        return "CPU fallback"
    if any(r["kind"] == "decomposed" for r in passed):
        return "decomposed"
    return "lowered"


def _count(rs, direction):
    rs = [r for r in rs if r["direction"] == direction and r["status"] not in ("cpu_error", "n/a")]
    if not rs:
        return ""
    return f"{sum(r['status'] == 'pass' for r in rs)}/{len(rs)}"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def core_aten_coverage() -> dict:
    """torch.Tag.core overloads: with a rule, handled by capture or a decomposition, or neither."""
    import torch
    from torch._decomp import decomposition_table
    from xlanb.capture.datadep import HANDLERS
    from xlanb.capture.handlers import SPECIAL
    from xlanb.lower.registry import has_rule
    counts = collections.Counter()
    missing = []
    for name in dir(torch.ops.aten):
        try:
            packet = getattr(torch.ops.aten, name)
            overloads = packet.overloads()
        except Exception:
            continue
        for ov in overloads:
            try:
                op = getattr(packet, ov)
            except Exception:
                continue
            if torch.Tag.core not in op.tags:
                continue
            key = str(op)
            if has_rule(key):
                counts["rule"] += 1
            elif key in SPECIAL or key in HANDLERS or op._schema.is_mutable or key.startswith("aten.sym_") \
                    or op in decomposition_table or op._can_decompose():
                counts["capture or decomposition"] += 1
            else:
                counts["neither"] += 1
                missing.append(key)
    return {"counts": dict(counts), "missing": missing}


def write_markdown(results: list[dict], meta: dict, path: Path, not_run: list | None = None) -> None:
    from skips import METADATA_ONLY, RANDOM_WHEN, SKIPS, TIES, TOLERANCE
    t = totals(results)
    by_op = collections.defaultdict(list)
    for r in results:
        by_op[r["op"]].append(r)
    status_count = collections.Counter(op_status(rs) for rs in by_op.values())
    f, b = t["fwd"], t["bwd"]
    pct = lambda a, n: round(100.0 * a / n, 2) if n else 0.0  # noqa: E731
    cuts = sum(1 for r in results if r["status"] == "pass" and r.get("cut"))
    core = meta.get("core") or core_aten_coverage()
    met = lambda v, k: "met" if v >= TARGETS[k] else "MISSED"  # noqa: E731
    lines = [
        "# Op coverage: torch's OpInfo suite on xla",
        "",
        "Generated by `tools/ops_sweep.py` (`make test-ops-full`) from a real run; do not edit by hand.",
        f"Run: {meta['date']}, torch {meta['torch']}, jax {meta['jax']}, {meta['minutes']:.1f} minutes "
        f"on {meta.get('jobs', 2)} worker processes.",
        "",
        "Every OpInfo of `torch.testing._internal.common_methods_invocations.op_db` "
        f"({meta['opinfos']} entries) runs its sample inputs on `xla` and on torch CPU, and the results are "
        "compared output by output with `torch.testing.assert_close` at the tolerance of the output's dtype "
        "(tests/ops/compare.py: float32 atol=rtol=1e-5, bfloat16 atol=1e-5 rtol=1.6e-2, float16 rtol=1e-3, "
        "widened by the OpInfo's own toleranceOverride; gradients 10x; integers and bool exact). A float32 "
        "result that misses is still accepted when it is as close to torch's float64 answer as torch's own "
        "float32 answer is, and a bfloat16 result when it matches torch's answer computed in float32 and "
        "rounded once (torch's CPU kernels round some intermediates to bfloat16).",
        "",
        f"Forward runs in {', '.join(FWD_DTYPES)} where the OpInfo supports the dtype; backward "
        "(torch.autograd.grad of the outputs times a fixed random cotangent, through the OpInfo's "
        f"gradcheck wrapper) in {', '.join(BWD_DTYPES)} for ops that support autograd. "
        + (f"At most {meta['samples']} samples per op, dtype and direction (the first the OpInfo generates). "
           if meta['samples'] else "Every sample the OpInfo generates. ")
        + "Only the function variant of each OpInfo runs (not its method or in-place variants).",
        "",
        "A sample is *lowered* when every ATen op that reached xlanb had a lowering rule, *decomposed* when "
        "some op went through a torch decomposition into ops with rules, and *CPU fallback* when some op ran "
        "on torch CPU (`aten::<op>` in `xlanb.metrics.executed_fallback_ops()`). An op's status is the "
        "weakest of its samples; *failing* when any sample fails. Skipped samples (tests/ops/skips.py, each "
        "with its reason) count as not passing; samples whose CPU reference itself raises, and backward "
        "samples with no differentiable input or output, are not counted.",
        "",
        "## Totals",
        "",
        "| | samples | pass | % | without fallback | % | lowered | decomposed | CPU fallback | fail | error | skipped |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| forward | {f['samples']} | {f['pass']} | **{t['forward_pct']}%** | {f['pass_no_fallback']} | "
        f"**{t['forward_no_fallback_pct']}%** | {f['lowered']} | {f['decomposed']} | {f['fallback']} | "
        f"{f['fail']} | {f['error']} | {f['skip']} |",
        f"| backward | {b['samples']} | {b['pass']} | **{t['backward_pct']}%** | {b['pass_no_fallback']} | "
        f"{pct(b['pass_no_fallback'], b['samples'])}% | {b['lowered']} | {b['decomposed']} | "
        f"{b['fallback']} | {b['fail']} | {b['error']} | {b['skip']} |",
        "",
        f"Targets: forward >= {TARGETS['forward']}% ({met(t['forward_pct'], 'forward')}), forward without "
        f"fallback >= {TARGETS['forward_no_fallback']}% "
        f"({met(t['forward_no_fallback_pct'], 'forward_no_fallback')}), backward >= {TARGETS['backward']}% "
        f"({met(t['backward_pct'], 'backward')}).",
        "",
        "OpInfos by status: " + ", ".join(f"{k} {v}" for k, v in sorted(status_count.items(), key=lambda kv: -kv[1]))
        + f" (of {len(by_op)} run"
        + (f"; {len(not_run)} more support none of the dtypes above" if not_run else "") + ").",
        "",
        f"Data-dependent output shapes (nonzero, masked_select, boolean-mask indexing, unique, "
        f"repeat_interleave): {cuts} passing samples computed a count first (a `GraphCut`) and the op "
        "itself on the device.",
        "",
        f"Core ATen (`torch.Tag.core`, {sum(core['counts'].values())} overloads): "
        + ", ".join(f"{v} {k}" for k, v in sorted(core["counts"].items(), key=lambda kv: -kv[1]))
        + (f" ({', '.join(core['missing'])})" if core["missing"] else "") + ".",
        "",
    ]
    fallback_ops = collections.Counter()
    for r in results:
        if r["status"] == "pass" and r["kind"] == "fallback":
            fallback_ops.update(r["fallback_ops"])
    if fallback_ops:
        lines += ["## ATen ops that ran on the CPU", "",
                  "`aten::<op>` counters in passing samples, with the number of samples:", "",
                  ", ".join(f"`{k}` {v}" for k, v in sorted(fallback_ops.items(), key=lambda kv: (-kv[1], kv[0]))),
                  ""]
    lines += ["## OpInfos", "",
              "| OpInfo | status | forward pass | backward pass | CPU ops | note |", "|---|---|---|---|---|---|"]
    for name in sorted(by_op):
        rs = by_op[name]
        falls = sorted({o for r in rs for o in r["fallback_ops"]})
        bad = [r for r in rs if r["status"] in ("fail", "error")]
        skips = sorted({f"{r['dtype']} {r['direction']}: {r['message']}" for r in rs if r["status"] == "skip"})
        notes = []
        if bad:
            notes.append(f"{bad[0]['dtype']} {bad[0]['direction']}: {bad[0]['message'][:160]}")
        notes += [f"skipped {x[:160]}" for x in skips]
        if name in METADATA_ONLY:
            notes.append(METADATA_ONLY[name])
        if name in RANDOM_WHEN:
            notes.append(RANDOM_WHEN[name][1])
        if name in TIES:
            notes.append(TIES[name])
        notes += [f"{dt}: wider tolerance" for (op, dt) in TOLERANCE if op == name]
        lines.append(f"| `{name}` | {op_status(rs)} | {_count(rs, 'fwd')} | {_count(rs, 'bwd')} | "
                     f"{', '.join(falls)} | {_md('; '.join(notes))} |")
    if not_run:
        lines += ["", f"Not run (no sample in {', '.join(FWD_DTYPES)}): "
                  + ", ".join(f"`{n}`" for n in sorted(not_run)) + "."]
    reasons = collections.Counter(SKIPS.values())
    lines += ["", "## The skip table and the comparison tables", "",
              f"`SKIPS` ({len(SKIPS)} entries, by reason):", ""]
    lines += [f"- {n}: {_md(reason)}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    modes = collections.Counter(METADATA_ONLY.values())
    lines += ["", f"`METADATA_ONLY` ({len(METADATA_ONLY)} OpInfos) and `RANDOM_WHEN` ({len(RANDOM_WHEN)}): "
              "outputs compared by shape and dtype only:", ""]
    lines += [f"- {n}: {_md(reason)}" for reason, n in sorted(modes.items(), key=lambda kv: -kv[1])]
    lines += [f"- `{k}`: {_md(v[1])}" for k, v in sorted(RANDOM_WHEN.items())]
    lines += ["", f"`TIES` ({len(TIES)} OpInfos: {', '.join(f'`{k}`' for k in sorted(TIES))}): indices of equal "
              "values are implementation-defined; the values are compared and the indices must select them.",
              "", f"`TOLERANCE` ({len(TOLERANCE)} entries):", ""]
    lines += [f"- `{op}` {dt}: atol={a:g}, rtol={r:g}: {_md(why)}"
              for (op, dt), (a, r, why) in sorted(TOLERANCE.items())]
    path.write_text("\n".join(lines) + "\n")


def from_json(path: Path, markdown: Path) -> None:
    data = json.loads(path.read_text())
    write_markdown(data["results"], data["meta"], markdown, data["meta"].get("not_run"))


# Main ---------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ops", default="", help="comma-separated OpInfo names (name or name.variant)")
    ap.add_argument("--samples", type=int, default=SAMPLES, help="samples per op, dtype and direction")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--dtypes", default=",".join(FWD_DTYPES), help="forward dtypes (e.g. add complex64)")
    ap.add_argument("--no-backward", action="store_true", help="forward only")
    ap.add_argument("--json", default=str(ROOT / "test-output" / "ops_sweep.json"))
    ap.add_argument("--markdown", default=str(ROOT / "docs" / "ops.md"))
    ap.add_argument("--check", action="store_true", help="exit 1 on a missed target or an unskipped failure")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--from-json", default="", help="rewrite the markdown from a sweep's JSON (no run)")
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return 0
    if args.from_json:
        from_json(Path(args.from_json), Path(args.markdown))
        return 0

    import jax
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    import harness

    wanted = set(filter(None, args.ops.split(",")))
    ops = [o for o in op_db if not wanted or harness.full_name(o) in wanted or o.name in wanted]
    tasks = []
    for o in ops:
        for dtype in args.dtypes.split(","):
            if harness.supports(o, dtype, "fwd"):
                tasks.append((harness.full_name(o), dtype, "fwd", args.samples))
        for dtype in () if args.no_backward else BWD_DTYPES:
            if harness.supports(o, dtype, "bwd"):
                tasks.append((harness.full_name(o), dtype, "bwd", args.samples))
    log = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    t0 = time.time()
    results = run_tasks(tasks, args.jobs, log)
    minutes = (time.time() - t0) / 60
    t = totals(results)
    ran = {task[0] for task in tasks}
    meta = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "jax": jax.__version__,
            "minutes": minutes, "samples": args.samples, "opinfos": len(op_db), "ops": len(ops),
            "jobs": args.jobs, "not_run": sorted({harness.full_name(o) for o in ops} - ran),
            "core": core_aten_coverage()}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"meta": meta, "totals": t, "results": results}, indent=0))
    if not wanted and args.dtypes == ",".join(FWD_DTYPES) and not args.no_backward:
        write_markdown(results, meta, Path(args.markdown), meta["not_run"])
    print(json.dumps(t, indent=1))
    print(f"{len(tasks)} tasks, {minutes:.1f} minutes")
    if args.check:
        bad = [r for r in results if r["status"] in ("fail", "error")]
        missed = [k for k, v in (("forward", t["forward_pct"]), ("forward_no_fallback", t["forward_no_fallback_pct"]),
                                 ("backward", t["backward_pct"])) if v < TARGETS[k]]
        for r in bad[:50]:
            print(f"FAIL {r['op']} {r['dtype']} {r['direction']} #{r['index']}: {r['message'][:200]}")
        if bad or (missed and not wanted):
            print(f"{len(bad)} unskipped failures; targets missed: {missed or 'none'}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
