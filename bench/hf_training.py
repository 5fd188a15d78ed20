"""W7: a real HF model's training step, xlanb (lazy, eager mode, replayed) against torch CPU eager.

GPT-2 (`GPT2LMHeadModel`, random init): 4 layers, d 256, 4 heads, vocab 8000, seq 128, batch 4,
AdamW, the loss HF computes from `labels`, dropout on (as in training). Figures: the first step
(compile included, persistent cache off), the steady step (median of W7_STEPS) and the graphs
compiled after step 3. After the timed steps, the trained weights are copied to a CPU model and an
eval-mode forward (no dropout, whose random masks differ between devices) must give CPU's loss.

Usage: python hf_training.py torch | python hf_training.py xlanb lazy|eager|replay | python hf_training.py torch_xla
(bench/run.py runs each in its own process per round, so every first step compiles from nothing).

torch_xla (lazy, its default mode; `torch_xla.sync()` and `xm.wait_device_ops()` where xlanb waits) runs
in an interpreter of its own: torch_xla pins its torch (2.9), which is not xlanb's test environment.
`make torch-xla-bench-env` builds one in build/torch-xla-venv (torch 2.9.0, torch_xla 2.9.0, CPU PJRT);
XLANB_BENCH_TORCH_XLA names another. Without one the torch_xla job is not run, and the run says so.
"""

from __future__ import annotations

import os
import pathlib
import sys

os.environ.setdefault("XLANB_PERSISTENT_CACHE", "0")

import torch  # noqa: E402

from common import emit, median, perf  # noqa: E402
from figures import Figure, at_most, none_in_any_round  # noqa: E402

W7 = dict(layers=4, d_model=256, heads=4, vocab=8000, seq=128, batch=4, lr=1e-4)
W7_STEPS = 8                      # timed steady steps, after 3 untimed ones
MODES = ("lazy", "eager", "replay")


def setup(device, retie: bool = False):
    """(step, model, ids): GPT-2 with AdamW on `device`. `retie`: tie the output layer to the input
    embedding again after the move, as HF's Trainer does on torch_xla, whose `.to("xla")` unties them
    (17 parameters where CPU and xlanb keep 16; an untied model is another computation)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=W7["layers"], n_embd=W7["d_model"], n_head=W7["heads"], vocab_size=W7["vocab"],
                     n_positions=W7["seq"], attn_implementation="eager")
    model = GPT2LMHeadModel(cfg)
    ids = torch.randint(0, W7["vocab"], (W7["batch"], W7["seq"]), generator=torch.Generator().manual_seed(0))
    model = model.to(device)
    if retie:
        model.tie_weights()
    opt = torch.optim.AdamW(model.parameters(), lr=W7["lr"])
    ids = ids.to(device)

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return step, model, ids


def forward_vs_cpu(model, ids) -> float:
    """The trained model's eval-mode loss on the device against the same weights on torch CPU: the
    relative difference."""
    from transformers import GPT2LMHeadModel
    cpu = GPT2LMHeadModel(model.config)
    cpu.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    with torch.no_grad():
        got = model.eval()(input_ids=ids, labels=ids).loss.item()
        want = cpu.eval()(input_ids=ids.cpu(), labels=ids.cpu()).loss.item()
    return abs(got - want) / abs(want)


def run(system: str, mode: str = "") -> None:
    sync = (lambda loss: loss)
    prefix = ""
    if system == "xlanb":
        import xlanb
        from xlanb import events, hooks
    if system == "torch_xla":
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.metrics as met
        sync = (lambda loss: (torch_xla.sync(), xm.wait_device_ops(), loss)[2])
    step, model, ids = setup("cpu" if system == "torch" else "xla", retie=system == "torch_xla")
    if system == "xlanb":
        xlanb.eager_mode(mode == "eager")
        if mode == "replay":
            step = xlanb.compile(step, replay=True)
        sync = (lambda loss: (xlanb.sync(wait=True), loss)[1])
        prefix = mode + "_"
    t0 = perf()
    sync(step()).item()
    first = perf() - t0
    for _ in range(2):
        sync(step())
    if system == "xlanb":
        mark = hooks.mark()
    if system == "torch_xla":
        compiled = (met.metric_data("CompileTime") or (0,))[0]
    times = []
    for _ in range(W7_STEPS):
        t0 = perf()
        sync(step())
        times.append(perf() - t0)
    metrics = {f"{prefix}first_step": first, f"{prefix}steady_step": median(times)}
    if system == "xlanb":
        metrics[f"{prefix}compiles_after_3"] = sum(isinstance(e, events.Compile) for e in hooks.since(mark))
    if system == "torch_xla":
        metrics["compiles_after_3"] = (met.metric_data("CompileTime") or (0,))[0] - compiled
    if system != "torch":
        difference = forward_vs_cpu(model, ids)
        assert difference <= 1e-4, f"W7 on {system}: eval loss {difference:.2e} from CPU's (relative)"
    emit("W7", system, metrics)


# bench/run.py: the jobs of one round, and the figures of the table

SCRIPT = "hf_training.py"          # run as `python hf_training.py <system> [mode]`
JOBS = [("torch", "W7", "W7")] + [("xlanb", f"W7{m}", "W7") for m in MODES] + [("torch_xla", "W7", "W7")]
TORCH_XLA_ENV = pathlib.Path(__file__).resolve().parent.parent / "build" / "torch-xla-venv" / "bin" / "python"


def command(system: str, arg: str) -> list[str]:
    return [SCRIPT, system, arg[2:]] if system == "xlanb" else [SCRIPT, system]


def interpreter(system: str) -> str | None:
    """The Python that runs `system`'s job: this one, or for torch_xla the one that has it (None: none)."""
    if system != "torch_xla":
        return sys.executable
    path = os.environ.get("XLANB_BENCH_TORCH_XLA") or (str(TORCH_XLA_ENV) if TORCH_XLA_ENV.exists() else "")
    return path or None


NO_TORCH_XLA = ("W7 on torch_xla: no interpreter with torch_xla (`make torch-xla-bench-env` builds "
                "build/torch-xla-venv; XLANB_BENCH_TORCH_XLA names another), so the W7 figures against it are missing.")


def _vs_torch(metric: str, torch_metric: str, system: str = "torch"):
    return lambda get: get("xlanb", f"W7.{metric}") / get(system, f"W7.{torch_metric}")


FIGURES = [
    Figure("W7.lazy_first_step", "W7 HF GPT-2 training step: first step, lazy (compile included)", "s",
           "W7.lazy_first_step", None, "W7.first_step"),
    Figure("W7.eager_first_step", "W7 first step, eager mode (the notebook's default)", "s",
           "W7.eager_first_step", None, "W7.first_step"),
    Figure("W7.eager_vs_lazy_first", "W7 first step, eager mode / lazy", "x",
           lambda get: get("xlanb", "W7.eager_first_step") / get("xlanb", "W7.lazy_first_step"),
           target=at_most(1.0, "<= 1.0 (eager no slower)")),
    Figure("W7.replay_first_step", "W7 first step, replayed function", "s", "W7.replay_first_step", None,
           "W7.first_step"),
    Figure("W7.lazy_steady_step", "W7 steady step, lazy", "s", "W7.lazy_steady_step", None, "W7.steady_step"),
    Figure("W7.eager_steady_step", "W7 steady step, eager mode", "s", "W7.eager_steady_step", None,
           "W7.steady_step"),
    Figure("W7.replay_steady_step", "W7 steady step, replayed", "s", "W7.replay_steady_step", None,
           "W7.steady_step"),
    Figure("W7.replay_vs_torch", "W7 steady step, replayed / torch CPU eager", "x",
           _vs_torch("replay_steady_step", "steady_step"), target=at_most(1.0, "<= 1.0x torch CPU eager")),
    Figure("W7.lazy_vs_torch_xla_first", "W7 first step, xlanb lazy / torch_xla lazy (compile included)", "x",
           _vs_torch("lazy_first_step", "first_step", "torch_xla"), target=at_most(0.6, "<= 0.6x torch_xla")),
    Figure("W7.eager_vs_torch_xla_first", "W7 first step, xlanb eager mode / torch_xla lazy", "x",
           _vs_torch("eager_first_step", "first_step", "torch_xla")),
    Figure("W7.lazy_vs_torch_xla_steady", "W7 steady step, xlanb lazy / torch_xla lazy", "x",
           _vs_torch("lazy_steady_step", "steady_step", "torch_xla")),
    Figure("W7.replay_vs_torch_xla_steady", "W7 steady step, xlanb replayed / torch_xla lazy", "x",
           _vs_torch("replay_steady_step", "steady_step", "torch_xla")),
    Figure("W7.lazy_compiles_after_3", "W7 graphs compiled after step 3, lazy", "n",
           "W7.lazy_compiles_after_3", target=none_in_any_round("0 in every round")),
    Figure("W7.replay_compiles_after_3", "W7 graphs compiled after step 3, replayed", "n",
           "W7.replay_compiles_after_3", target=none_in_any_round("0 in every round")),
]


if __name__ == "__main__":
    run(*sys.argv[1:])
