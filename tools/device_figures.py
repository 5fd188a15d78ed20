"""The figures docs/portability.md and docs/debugging.md quote for an accelerator, measured where it runs.

    python tools/device_figures.py [--out DIR] [--size N] [SECTION ...]

Sections (all by default), each printed as one JSON line and gathered in DIR/device_figures.json:

    precision   float32 matmul and convolution error against float64 under each
                torch.set_float32_matmul_precision, and an N^3 matmul's time under each
    accuracy    each of exp, log, tanh, ... on 100,000 float32 and float64 points: the largest
                relative error against float64 (|value| >= 1e-3), on xla and on the CPU
    compare     xlanb.compare() over a tiny HF Llama's forward and backward at "highest" (the
                platform's defaults and torch's), "high" and "medium": statuses, the first
                divergence, the hint, and the step's time with and without compare
    debug_nans  the error debug_nans gives for sqrt of a negative number
    decode      compiles of a static-cache greedy generate() of 4 and 16 tokens (tiny GPT-2 and
                Llama), and explain_recompiles()
    first_step  W4's first lazy step: each graph's ops, XLA compile and lowering seconds

One process holds a TPU chip: run nothing else on it meanwhile. transformers is needed for compare
and decode. A section that raises records its traceback and the others run.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests" / "models"), str(ROOT / "tests")]

import torch  # noqa: E402

import xlanb  # noqa: E402
from xlanb import events, hooks  # noqa: E402

perf = time.perf_counter
PRECISIONS = ("highest", "high", "medium")


def _relative(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.double() - ref).abs().max() / ref.abs().max())


def precision(size: int) -> dict:
    torch.manual_seed(0)
    a, b = torch.randn(256, 1024), torch.randn(1024, 256)
    x, w = torch.randn(4, 8, 32, 32), torch.randn(16, 8, 3, 3)
    conv = torch.nn.functional.conv2d
    ref, cref = a.double() @ b.double(), conv(x.double(), w.double())
    out = {"cpu": {"mm": _relative(a @ b, ref), "conv": _relative(conv(x, w), cref)}}
    big_a, big_b = torch.randn(size, size).to("xla"), torch.randn(size, size).to("xla")
    xlanb.sync(wait=True)
    try:
        for p in PRECISIONS:
            torch.set_float32_matmul_precision(p)
            times = []
            for _ in range(6):
                t0 = perf()
                big_a @ big_b
                xlanb.sync(wait=True)
                times.append(perf() - t0)
            out[p] = {"mm": _relative((a.to("xla") @ b.to("xla")).cpu(), ref),
                      "conv": _relative(conv(x.to("xla"), w.to("xla")).cpu(), cref),
                      f"mm{size}_ms": sorted(times[1:])[2] * 1e3}
    finally:
        torch.set_float32_matmul_precision("highest")
    return out


def accuracy(size: int) -> dict:
    """op.dtype -> [xla's largest relative error, the CPU's] against float64."""
    F = torch.nn.functional
    ops = {"exp": (torch.exp, -20, 20), "log": (torch.log, 1e-3, 1e3), "tanh": (torch.tanh, -5, 5),
           "erf": (torch.erf, -3, 3), "sigmoid": (torch.sigmoid, -10, 10), "rsqrt": (torch.rsqrt, 1e-3, 1e3),
           "sqrt": (torch.sqrt, 0, 1e3), "sin": (torch.sin, -10, 10), "log1p": (torch.log1p, -0.9, 10),
           "gelu": (F.gelu, -5, 5), "silu": (F.silu, -10, 10), "pow2.5": (lambda t: t ** 2.5, 0, 10),
           "div": (lambda t: 1.0 / t, 0.1, 100), "softmax": (lambda t: t.view(-1, 1000).softmax(-1), -10, 10),
           "log_softmax": (lambda t: t.view(-1, 1000).log_softmax(-1), -10, 10)}
    out = {}
    for dtype in (torch.float32, torch.float64):
        for name, (fn, lo, hi) in ops.items():
            x = torch.linspace(lo, hi, 100_000, dtype=dtype)
            ref = fn(x.double())
            big = ref.abs() >= 1e-3

            def worst(got):
                return float(((got.double() - ref).abs()[big] / ref.abs()[big]).max())
            out[f"{name}.{str(dtype).removeprefix('torch.')}"] = [worst(fn(x.to("xla")).cpu()), worst(fn(x))]
    return out


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).to("xla"), torch.randint(0, 300, (2, 16)).to("xla")


def compare(size: int) -> dict:
    out = {}
    runs = (("highest", {}), ("highest, torch's defaults", {"rtol": 1.3e-6, "atol": 1e-5}), ("high", {}),
            ("medium", {}))
    try:
        for name, tolerance in runs:
            torch.set_float32_matmul_precision(name.split(",")[0])
            model, ids = _llama()

            def step():
                model.zero_grad(set_to_none=True)
                model(ids, labels=ids).loss.backward()
                xlanb.sync(wait=True)
            plain = []
            for _ in range(3):
                t0 = perf()
                step()
                plain.append(perf() - t0)
            compared = []
            for _ in range(2):          # the first compiles the region's graph
                mark = hooks.mark()
                t0 = perf()
                with xlanb.compare(**tolerance) as cmp:
                    step()
                compared.append(perf() - t0)
            (e,) = [e for e in hooks.since(mark) if isinstance(e, events.Compared)]
            first = cmp.first_divergence
            out[name] = {"ok": cmp.ok, "widened": e.widened, "hint": e.hint,
                         "statuses": {s: sum(r.status == s for r in cmp.rows) for s in ("ok", "inherited", "introduced")},
                         "first": None if first is None else {k: getattr(first, k) for k in
                                                               ("op", "location", "module", "phase", "max_abs", "max_rel")},
                         "plain_s": plain[-1], "compare_s": compared[-1]}
    finally:
        torch.set_float32_matmul_precision("highest")
    return out


def debug_nans(size: int) -> dict:
    with xlanb.config.override(debug_nans=True):
        x = torch.tensor([4.0, -1.0]).to("xla")
        try:
            y = torch.sqrt(x) * 2          # live: the sync computes it
            xlanb.sync(wait=True)
            del y
        except FloatingPointError as error:
            return {"raised": str(error)}
    return {"raised": None}


def decode(size: int) -> dict:
    import test_hf_models as hf
    out = {}
    for arch in ("gpt2", "llama"):
        for tokens in (4, 16):
            xlanb.reset()
            got, ref, evs, _ = hf.generate_both(arch, tokens, cache_implementation="static")
            out[f"{arch} {tokens} tokens"] = {"same tokens": bool(torch.equal(got, ref)),
                                              "compiles": sum(isinstance(e, events.Compile) for e in evs)}
        out[f"{arch} recompiles"] = xlanb.debug.explain_recompiles()[-3000:]
    return out


def first_step(size: int) -> dict:
    from models import w4_setup
    body = w4_setup("xla")
    mark = hooks.mark()
    t0 = perf()
    body()
    xlanb.sync(wait=True)
    took = perf() - t0
    graphs = [{"name": e.name, "ops": e.nodes, "compile_s": e.compile_ns / 1e9}
              for e in hooks.since(mark) if isinstance(e, events.Compile)]
    return {"first_step_s": took, "graphs": graphs}


SECTIONS = {f.__name__: f for f in (precision, accuracy, compare, debug_nans, decode, first_step)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sections", nargs="*", help=f"some of {', '.join(SECTIONS)} (default: all)")
    parser.add_argument("--out", default=".", help="folder for device_figures.json")
    parser.add_argument("--size", type=int, default=4096, help="the timed matmul's size (precision)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section {unknown[0]!r}: choose from {', '.join(SECTIONS)}")
    import jax
    found = {"devices": [str(d) for d in jax.devices()], "torch": torch.__version__, "jax": jax.__version__}
    path = pathlib.Path(args.out) / "device_figures.json"
    failed = False
    for name in args.sections or SECTIONS:
        t0 = perf()
        try:
            found[name] = SECTIONS[name](args.size)
        except Exception:       # the others still run
            found[name] = {"error": traceback.format_exc()[-3000:]}
            failed = True
        found[name + "_s"] = perf() - t0
        print(name, json.dumps(found[name], default=str), flush=True)
        path.write_text(json.dumps(found, default=str, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
