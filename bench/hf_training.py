"""W7: a real HF model's training step, xlanb (lazy, eager mode, replayed) against torch CPU eager.

GPT-2 (`GPT2LMHeadModel`, random init): 4 layers, d 256, 4 heads, vocab 8000, seq 128, batch 4,
AdamW, the loss HF computes from `labels`, dropout on (as in training). Figures: the first step
(compile included, persistent cache off), the steady step (median of W7_STEPS) and the graphs
compiled after step 3. After the timed steps, the trained weights are copied to a CPU model and an
eval-mode forward (no dropout, whose random masks differ between devices) must give CPU's loss.

Usage: python hf_training.py torch | python hf_training.py xlanb lazy|eager|replay
(bench/run.py runs each in its own process per round, so every first step compiles from nothing).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("XLANB_PERSISTENT_CACHE", "0")

import torch  # noqa: E402

from common import emit, median, perf  # noqa: E402
from figures import Figure, at_most, none_in_any_round  # noqa: E402

W7 = dict(layers=4, d_model=256, heads=4, vocab=8000, seq=128, batch=4, lr=1e-4)
W7_STEPS = 8                      # timed steady steps, after 3 untimed ones
MODES = ("lazy", "eager", "replay")


def setup(device):
    """(step, model, ids): GPT-2 with AdamW on `device`."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=W7["layers"], n_embd=W7["d_model"], n_head=W7["heads"], vocab_size=W7["vocab"],
                     n_positions=W7["seq"], attn_implementation="eager")
    model = GPT2LMHeadModel(cfg)
    ids = torch.randint(0, W7["vocab"], (W7["batch"], W7["seq"]), generator=torch.Generator().manual_seed(0))
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=W7["lr"])
    ids = ids.to(device)

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return step, model, ids


def same_forward_as_cpu(model, ids) -> None:
    """The trained model's eval-mode loss on the device, against the same weights on torch CPU."""
    from transformers import GPT2LMHeadModel
    cpu = GPT2LMHeadModel(model.config)
    cpu.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    with torch.no_grad():
        got = model.eval()(input_ids=ids, labels=ids).loss.item()
        want = cpu.eval()(input_ids=ids.cpu(), labels=ids.cpu()).loss.item()
    assert abs(got - want) <= 1e-4 * abs(want), f"W7: eval loss {got} on the device against CPU's {want}"


def run(system: str, mode: str = "") -> None:
    sync = (lambda loss: loss)
    prefix = ""
    if system == "xlanb":
        import xlanb
        from xlanb import events, hooks
    step, model, ids = setup("cpu" if system == "torch" else "xla")
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
    times = []
    for _ in range(W7_STEPS):
        t0 = perf()
        sync(step())
        times.append(perf() - t0)
    metrics = {f"{prefix}first_step": first, f"{prefix}steady_step": median(times)}
    if system == "xlanb":
        metrics[f"{prefix}compiles_after_3"] = sum(isinstance(e, events.Compile) for e in hooks.since(mark))
        same_forward_as_cpu(model, ids)
    emit("W7", system, metrics)


# bench/run.py: the jobs of one round, and the figures of the table

SCRIPT = "hf_training.py"          # run as `python hf_training.py <system> [mode]`
JOBS = [("torch", "W7", "W7")] + [("xlanb", f"W7{m}", "W7") for m in MODES]


def command(system: str, arg: str) -> list[str]:
    return [SCRIPT, system, arg[2:]] if system == "xlanb" else [SCRIPT, system]


def _vs_torch(metric: str, torch_metric: str):
    return lambda get: get("xlanb", f"W7.{metric}") / get("torch", f"W7.{torch_metric}")


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
    Figure("W7.lazy_compiles_after_3", "W7 graphs compiled after step 3, lazy", "n",
           "W7.lazy_compiles_after_3", target=none_in_any_round("0 in every round")),
    Figure("W7.replay_compiles_after_3", "W7 graphs compiled after step 3, replayed", "n",
           "W7.replay_compiles_after_3", target=none_in_any_round("0 in every round")),
]


if __name__ == "__main__":
    run(*sys.argv[1:])
