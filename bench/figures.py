"""The figures `make bench` reports: what each one reads, its target, and the results table.

A figure's value for xlanb, pure JAX and torch CPU is read per round (one process per system and
round), then summarised as median, min and max over the rounds; the ratio xlanb / JAX is taken
within each round, so it compares processes that ran side by side.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Callable

SYSTEMS = ("xlanb", "jax", "torch")
MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Target:
    text: str
    on: str                                  # "ratio" (xlanb / JAX) or "xlanb" (the value itself)
    check: Callable[[dict], bool]            # a summary {median, min, max} -> met


def ratio_at_most(limit: float) -> Target:
    return Target(f"<= {float(limit)}x JAX", "ratio", lambda s: s["median"] <= limit)


def at_most(limit: float, text: str) -> Target:
    return Target(text, "xlanb", lambda s: s["median"] <= limit)


def none_in_any_round(text: str = "0") -> Target:
    return Target(text, "xlanb", lambda s: s["max"] == 0)


def positive(text: str) -> Target:
    return Target(text, "xlanb", lambda s: s["min"] > 0)


@dataclasses.dataclass(frozen=True)
class Figure:
    """One row: `xlanb`/`jax`/`torch` name a metric ("W3.steady_step") or compute one from a round
    (`get(system, metric)`)."""
    id: str
    label: str
    unit: str                                # "s", "MiB", "B", "n" (count), "x" (a ratio) or "%" (a share)
    xlanb: str | Callable | None = None
    jax: str | Callable | None = None
    torch: str | Callable | None = None
    target: Target | None = None


def _diff(a: str, b: str, system_b: str = "jax"):
    return lambda get: get("xlanb", a) - get(system_b, b)


def _over(a: str, b: str):
    return lambda get: get("xlanb", a) / get("xlanb", b)


def _sum(*metrics: str):
    return lambda get: sum(get("xlanb", m) for m in metrics)


def _w5_growth(small: str, large: str, factor: int, stages):
    """Per-node time at the larger size over per-node time at the smaller one (1.0: linear)."""
    def growth(get):
        return (sum(get("xlanb", f"W5.{s}_{large}") for s in stages) / factor
                / sum(get("xlanb", f"W5.{s}_{small}") for s in stages))
    return growth


def catalogue(w5_sizes=("1k", "10k", "100k"), w5_lowered=("1k", "10k")) -> list[Figure]:
    figs = [
        Figure("W1.trace_per_op", "W1 trace per op (recording only)", "s", "W1.trace_per_op",
               target=at_most(5e-6, "<= 5 us/op")),
        Figure("W1.cached_step", "W1 cached 1000-op step, incl. sync + wait", "s",
               "W1.cached_step", "W1.cached_step", "W1.cached_step", ratio_at_most(6)),
        Figure("W1.first_call", "W1 first call (fresh process, compile included)", "s",
               "W1.first_call", "W1.first_call", "W1.first_call", ratio_at_most(1.2)),
        Figure("W2.per_op", "W2 eager op, forced (200-op mix)", "s",
               "W2.per_op", "W2.per_op", "W2.per_op", ratio_at_most(1.0)),
        Figure("W3.first_step", "W3 first step, lazy (compile included)", "s",
               "W3.first_step", "W3.first_step", "W3.first_step", ratio_at_most(1.2)),
        Figure("W3.steady_step", "W3 steady step, lazy, wait per step", "s",
               "W3.steady_step", "W3.steady_step", "W3.steady_step", ratio_at_most(1.5)),
        Figure("W3.steady_no_wait", "W3 steady step, lazy, no wait per step (async)", "s",
               "W3.steady_no_wait", "W3.steady_no_wait", "W3.steady_step"),
        Figure("W3.host_overhead", "W3 host overhead per step (lazy - JAX, wait per step)", "s",
               _diff("W3.steady_step", "W3.steady_step"), target=at_most(0.5e-3, "<= 0.5 ms")),
        Figure("W3.host_overhead_no_wait", "W3 host overhead per step (lazy - JAX, no wait)", "s",
               _diff("W3.steady_no_wait", "W3.steady_no_wait")),
        Figure("W3_compile.first_step", "W3 first step, `xlanb.compile`d", "s",
               "W3_compile.first_step", "W3.first_step", target=ratio_at_most(1.2)),
        Figure("W3_compile.steady_step", "W3 steady step, `xlanb.compile`d, wait per step", "s",
               "W3_compile.steady_step", "W3.steady_step", target=ratio_at_most(1.1)),
        Figure("W3_compile.vs_lazy", "W3 steady step, compiled / lazy", "x",
               _over("W3_compile.steady_step", "W3.steady_step"), target=at_most(1.0, "<= 1.0 (never slower)")),
        Figure("W3_compile.host_overhead", "W3 host overhead per step (compiled - JAX)", "s",
               _diff("W3_compile.steady_step", "W3.steady_step")),
        Figure("W4.first_step", "W4 first step, lazy (compile included)", "s",
               "W4.first_step", "W4.first_step", "W4.first_step", ratio_at_most(1.2)),
        Figure("W4.steady_step", "W4 steady step, lazy, wait per step", "s",
               "W4.steady_step", "W4.steady_step", "W4.steady_step", ratio_at_most(1.3)),
        Figure("W4.host_overhead", "W4 host overhead per step (lazy - JAX)", "s",
               _diff("W4.steady_step", "W4.steady_step")),
        Figure("W4.recompiles_after_2", "W4 recompiles after step 2 (AdamW + LambdaLR), lazy", "n",
               "W4.recompiles_after_2", "W4.recompiles_after_2", target=none_in_any_round("0 in every round")),
        Figure("W4_compile.first_step", "W4 first step, `xlanb.compile`d", "s",
               "W4_compile.first_step", "W4.first_step", target=ratio_at_most(1.2)),
        Figure("W4_compile.steady_step", "W4 steady step, `xlanb.compile`d", "s",
               "W4_compile.steady_step", "W4.steady_step", target=ratio_at_most(1.1)),
        Figure("W4_compile.recompiles_after_2", "W4 recompiles after step 2, compiled", "n",
               "W4_compile.recompiles_after_2", target=none_in_any_round("0 in every round")),
        Figure("W1_replay.cached_step", "W1 cached step, replayed (`xlanb.compile(fn, replay=True)`)", "s",
               "W1_replay.steady_step", "W1.cached_step", target=ratio_at_most(1.2)),
        Figure("W3_replay.steady_step", "W3 steady step, replayed, wait per step", "s",
               "W3_replay.steady_step", "W3.steady_step", target=ratio_at_most(1.1)),
        Figure("W3_replay.host_overhead", "W3 host overhead per step (replayed - JAX, wait per step)", "s",
               _diff("W3_replay.steady_step", "W3.steady_step"), target=at_most(0.1e-3, "<= 0.1 ms")),
        Figure("W3_replay.host", "W3 replayed call alone (guards, launch, rebinding)", "s", "W3_replay.host"),
        Figure("W3_replay.first_step", "W3 first step, replayed function (compile included)", "s",
               "W3_replay.first_step", "W3.first_step"),
        Figure("W3_replay.recompiles_after_2", "W3 recompiles after step 2, replayed", "n",
               "W3_replay.recompiles_after_2", target=none_in_any_round("0 in every round")),
        Figure("W4_replay.steady_step", "W4 steady step, replayed (LambdaLR stepped outside)", "s",
               "W4_replay.steady_step", "W4.steady_step", target=ratio_at_most(1.0)),
        Figure("W4_replay.host", "W4 replayed call alone", "s", "W4_replay.host"),
        Figure("W4_replay.recompiles_after_2", "W4 recompiles after step 2, replayed", "n",
               "W4_replay.recompiles_after_2", target=none_in_any_round("0 in every round")),
        Figure("W1_torch_compile.cached_step", "W1 cached step, `torch.compile(backend=\"xlanb\")`", "s",
               "W1_torch_compile.cached_step", "W1.cached_step", target=ratio_at_most(1.2)),
        Figure("W1_torch_compile.first_call", "W1 first call, `torch.compile` (dynamo capture included)", "s",
               "W1_torch_compile.first_call", "W1.first_call"),
        Figure("W3_torch_compile.steady_step", "W3 steady step, `torch.compile`d whole step, wait per step", "s",
               "W3_torch_compile.steady_step", "W3.steady_step", target=ratio_at_most(1.1)),
        Figure("W3_torch_compile.host_overhead", "W3 host overhead per step (`torch.compile` - JAX)", "s",
               _diff("W3_torch_compile.steady_step", "W3.steady_step")),
        Figure("W3_torch_compile.executables_per_step", "W3 executables per step, `torch.compile`", "n",
               "W3_torch_compile.executables_per_step", target=at_most(1.0, "1")),
        Figure("W4_torch_compile.first_step", "W4 first step, `torch.compile` (dynamo capture included)", "s",
               "W4_torch_compile.first_step", "W4.first_step"),
        Figure("W4_torch_compile.steady_step", "W4 steady step, `torch.compile`d whole step", "s",
               "W4_torch_compile.steady_step", "W4.steady_step", target=ratio_at_most(1.1)),
        Figure("W4_torch_compile.recompiles_after_2", "W4 recompiles after step 2, `torch.compile`", "n",
               "W4_torch_compile.recompiles_after_2", target=none_in_any_round("0 in every round")),
        Figure("W4_torch_compile.executables_per_step", "W4 executables per step, `torch.compile`", "n",
               "W4_torch_compile.executables_per_step", target=at_most(1.0, "1")),
    ]
    for size in w5_sizes:
        stages = ("trace", "hash", "key") + (("lower", "compile") if size in w5_lowered else ())
        names = {"trace": "trace", "hash": "hash of the key", "key": "key (`build_graph`)",
                 "lower": "lower (`lower_graph`)", "compile": "XLA compile"}
        figs += [Figure(f"W5.{s}_{size}", f"W5 {size} nodes: {names[s]}", "s", f"W5.{s}_{size}") for s in stages]
    stages = ("trace", "key", "lower")
    figs += [
        Figure("W5.growth_10k", "W5 trace+key+lower per node, 10k / 1k", "x",
               _w5_growth("1k", "10k", 10, stages), target=at_most(1.3, "<= 1.3 (linear)")),
        Figure("W5.compile_growth_10k", "W5 XLA compile per node, 10k / 1k", "x",
               _w5_growth("1k", "10k", 10, ("compile",))),
        Figure("W5.growth_100k", "W5 trace+key per node, 100k / 10k", "x",
               _w5_growth("10k", "100k", 10, ("trace", "key"))),
        Figure("W5.report_build_10k", "W5 10k nodes: cell report built (`build_report`)", "s", "W5.report_build_10k"),
        Figure("W5.report_render_10k", "W5 10k nodes: report HTML render (`render_html`)", "s",
               "W5.report_render_10k"),
        Figure("W5.report_10k", "W5 10k nodes: report built + rendered", "s",
               _sum("W5.report_build_10k", "W5.report_render_10k"), target=at_most(1.0, "< 1 s")),
        Figure("lower.per_1000", "lowering per 1000 nodes (xlanb lower vs JAX trace+lower)", "s",
               "W1.lower_1000", "W1.lower_1000", target=ratio_at_most(1.2)),
        Figure("notebook.eager_op_hooks", "notebook: hooks + report on a one-op eager cell", "s",
               "notebook.eager_op_hooks", target=at_most(5e-3, "<= 5 ms")),
        Figure("notebook.eager_op_unloaded", "notebook: one-op eager cell, extension unloaded", "s",
               "notebook.eager_op_unloaded"),
        Figure("notebook.compiled_step_hooks", "notebook: hooks + report on a compiled-step (W3) cell", "s",
               "notebook.compiled_step_hooks"),
        Figure("notebook.compiled_step_unloaded", "notebook: compiled-step cell, extension unloaded", "s",
               "notebook.compiled_step_unloaded"),
    ]
    figs += [Figure(f"W3.rss_{i}", f"host RSS after W3 step {i} (lazy)", "MiB", f"W3.rss_{i}")
             for i in (1, 10, 100, 1000)]
    figs.append(Figure("W3.rss_growth", "host RSS growth, W3 step 10 -> 1000", "MiB",
                       _diff("W3.rss_1000", "W3.rss_10", "xlanb"), target=at_most(2.0, "<= 2 MiB (no growth)")))
    for kind, target in (("argument", None), ("output", None), ("temp", None),
                         ("alias", positive("> 0 (donation works)"))):
        figs.append(Figure(f"W3.device_{kind}", f"W3 step device bytes: {kind}", "B",
                           f"W3.device_{kind}", f"W3.device_{kind}", target=target))
    from generation import FIGURES as W6_FIGURES       # W6 (HF generate) lives in its own module
    from hf_training import FIGURES as W7_FIGURES      # W7 (an HF model's training step) too
    from module_scopes import FIGURES as SCOPE_FIGURES  # so do module scopes' costs
    from compile_effort import FIGURES as EFFORT_FIGURES  # compile_effort=fast against default
    from debug_nans import FIGURES as NAN_FIGURES       # debug_nans' cost
    from notebook06 import FIGURES as NB06_FIGURES      # and notebook 06's steps in a kernel
    return figs + W6_FIGURES + W7_FIGURES + SCOPE_FIGURES + NAN_FIGURES + EFFORT_FIGURES + NB06_FIGURES


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "samples": values}


def evaluate(samples: dict, rounds: int) -> list[dict]:
    """samples: {system: {metric: [value per round]}} -> one dict per figure that has data."""
    rows = []
    for fig in catalogue():
        row = {"id": fig.id, "label": fig.label, "unit": fig.unit}
        per_round: dict[str, dict] = {s: {} for s in SYSTEMS}      # system -> {round: value}
        for r in range(rounds):
            def get(system, metric, r=r):
                return samples[system][metric][r]
            for system in SYSTEMS:
                source = getattr(fig, system)
                try:
                    value = source(get) if callable(source) else get(system, source)
                except (KeyError, IndexError, TypeError):
                    continue                  # not measured in this round (--only, or the job failed)
                if value is not None:
                    per_round[system][r] = value
        for system in SYSTEMS:
            if per_round[system]:
                row[system] = summary(list(per_round[system].values()))
        if "xlanb" not in row:
            continue
        both = [r for r in per_round["xlanb"] if per_round["jax"].get(r)]
        if both and fig.unit != "B":
            row["ratio"] = summary([per_round["xlanb"][r] / per_round["jax"][r] for r in both])
        if fig.target is not None:
            measured = row.get("ratio") if fig.target.on == "ratio" else row["xlanb"]
            row["target"] = fig.target.text
            row["met"] = bool(measured and fig.target.check(measured))
        rows.append(row)
    return rows


def fmt(v: float, unit: str) -> str:
    if unit == "s":
        a = abs(v)
        if a < 1e-3:
            return f"{v * 1e6:.1f} us"
        if a < 1:
            return f"{v * 1e3:.2f} ms"
        return f"{v:.2f} s"
    if unit == "MiB":
        return f"{v:.1f} MiB"
    if unit == "B":
        return f"{v / 1024:.0f} KiB"
    if unit == "n":
        return f"{v:g}"
    if unit == "%":
        return f"{v * 100:.2f}%"
    return f"{v:.2f}x"


def cell(s: dict | None, unit: str) -> str:
    if s is None:
        return "-"
    text = fmt(s["median"], unit)
    if len(s["samples"]) > 1:
        text += f" ({fmt(s['min'], unit)} - {fmt(s['max'], unit)})"
    return text


def table(rows: list[dict]) -> str:
    lines = ["| figure | xlanb | pure JAX | torch CPU eager | xlanb / JAX | target | |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = "" if "met" not in r else ("met" if r["met"] else "**missed**")
        values = [cell(r.get(s), r["unit"]) for s in SYSTEMS] + [cell(r.get("ratio"), "x")]
        lines.append(f"| {r['label']} | {' | '.join(values)} | {r.get('target', '')} | {mark} |")
    return "\n".join(lines)
