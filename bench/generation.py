"""W6: greedy HF generate() with a static cache, xlanb (lazy mode, eager mode, the model's forward
replayed or through torch.compile(backend="xlanb"), and `xlanb.generate`, which replays the whole decode
step) against torch CPU eager.

A tiny Llama (2 layers, d 256, 4 heads, vocab 1000, random init), a 32-token prompt, 64 new tokens,
`cache_implementation="static"`. Figures: milliseconds per new token (the whole generate() call,
prefill included, over 64), the compiles of the first call and of a later one, and the graphs and
ops each token executes.

Usage: python generation.py xlanb|torch (bench/run.py runs both, one process each, per round).
"""

from __future__ import annotations

import sys

import torch

from common import emit, median, perf
from figures import Figure, Target, at_most, none_in_any_round

W6 = dict(layers=2, d_model=256, heads=4, vocab=1000, d_ff=1024, prompt=32, new_tokens=64)
W6_CALLS = 3                      # timed generate() calls after the first


def w6_model():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=W6["vocab"], hidden_size=W6["d_model"], intermediate_size=W6["d_ff"],
                      num_hidden_layers=W6["layers"], num_attention_heads=W6["heads"],
                      num_key_value_heads=W6["heads"], max_position_embeddings=128, attn_implementation="sdpa")
    return LlamaForCausalLM(cfg).eval()


def w6_prompt():
    return torch.randint(3, W6["vocab"], (1, W6["prompt"]), generator=torch.Generator().manual_seed(1))


def generate(model, ids):
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=W6["new_tokens"], do_sample=False, pad_token_id=0,
                              cache_implementation="static")


def run_torch():
    model, ids = w6_model(), w6_prompt()
    t0 = perf()
    generate(model, ids)
    first = perf() - t0
    per_token = []
    for _ in range(W6_CALLS):
        t0 = perf()
        generate(model, ids)
        per_token.append((perf() - t0) / W6["new_tokens"])
    emit("W6", "torch", {"first_call": first, "per_token": median(per_token)})


def run_xlanb():
    import xlanb
    from xlanb import events, hooks
    model, ids = w6_model(), w6_prompt()
    expected = generate(model, ids)
    dev, dev_ids = model.to("xla"), ids.to("xla")
    metrics = {}
    forward = dev.forward
    for mode in ("lazy", "eager", "replay", "compile"):
        xlanb.reset()
        xlanb.eager_mode(mode == "eager")
        if mode == "replay":           # the documented one-liner: the model's forward replayed
            dev.forward = xlanb.compile(forward, replay=True)
        if mode == "compile":          # torch.compile(backend="xlanb") of the model's forward
            dev.forward = torch.compile(forward, backend="xlanb", dynamic=False)
        mark = hooks.mark()
        t0 = perf()
        out = generate(dev, dev_ids).cpu()
        metrics[f"{mode}_first_call"] = perf() - t0
        assert torch.equal(out, expected), f"W6 {mode}: the tokens differ from torch CPU's"
        first = hooks.since(mark)
        mark = hooks.mark()
        per_token = []
        for _ in range(W6_CALLS):
            t0 = perf()
            generate(dev, dev_ids).cpu()
            per_token.append((perf() - t0) / W6["new_tokens"])
        later = hooks.since(mark)
        metrics[f"{mode}_per_token"] = median(per_token)
        metrics[f"{mode}_compiles_first_call"] = sum(isinstance(e, events.Compile) for e in first)
        metrics[f"{mode}_compiles_later_calls"] = sum(isinstance(e, events.Compile) for e in later)
        if mode == "replay":
            metrics["replay_replayed_per_token"] = (sum(isinstance(e, events.Replay) for e in later)
                                                    / (W6_CALLS * W6["new_tokens"]))
        if mode == "lazy":
            nodes = {e.key: e.nodes for e in first if isinstance(e, events.Compile)}
            runs = [e for e in later if isinstance(e, events.Execute)]
            step_graphs = [nodes[e.key] for e in runs if nodes.get(e.key, 0) > 50]
            metrics["lazy_graphs_per_token"] = len(runs) / (W6_CALLS * W6["new_tokens"])
            metrics["lazy_ops_per_token_graph"] = max(step_graphs)
            metrics["lazy_decode_graph_sizes"] = len(set(step_graphs))
    xlanb.eager_mode(False)
    xlanb.reset()
    dev.forward = forward
    metrics.update(_xlanb_generate(dev, dev_ids, expected))
    emit("W6", "xlanb", metrics)


def _xlanb_generate(dev, dev_ids, expected) -> dict:
    """`xlanb.generate`: the whole decode step replayed (the first call compiles, later ones compile nothing)."""
    import xlanb
    from xlanb import events, hooks

    def call():
        return xlanb.generate(dev, dev_ids, max_new_tokens=W6["new_tokens"], do_sample=False, pad_token_id=0).cpu()
    t0 = perf()
    out = call()
    first = perf() - t0
    assert torch.equal(out, expected), "W6 xlanb.generate: the tokens differ from torch CPU's"
    mark = hooks.mark()
    per_token = []
    for _ in range(W6_CALLS):
        t0 = perf()
        out = call()
        per_token.append((perf() - t0) / W6["new_tokens"])
        assert torch.equal(out, expected), "W6 xlanb.generate: the tokens differ from torch CPU's"
    later = hooks.since(mark)
    return {"generate_first_call": first, "generate_per_token": median(per_token),
            "generate_compiles_later_calls": sum(isinstance(e, events.Compile) for e in later)}


# bench/run.py: the jobs of one round, and the figures of the table

SCRIPT = "generation.py"           # run as `python generation.py <system>`
JOBS = [("torch", "W6", "W6"), ("xlanb", "W6", "W6")]


def _vs_torch(metric: str):
    return lambda get: get("xlanb", metric) / get("torch", "W6.per_token")


def _vs_torch_target(limit: float) -> Target:
    return at_most(limit, f"<= {limit}x torch CPU eager")


FIGURES = [
    Figure("W6.lazy_per_token", "W6 generate(), static cache: per new token, lazy", "s",
           "W6.lazy_per_token", None, "W6.per_token"),
    Figure("W6.lazy_vs_torch", "W6 per new token, lazy / torch CPU eager", "x",
           _vs_torch("W6.lazy_per_token"), target=_vs_torch_target(2.0)),
    Figure("W6.replay_per_token", "W6 per new token, forward replayed (`xlanb.compile(forward, replay=True)`)",
           "s", "W6.replay_per_token", None, "W6.per_token"),
    Figure("W6.replay_vs_torch", "W6 per new token, replayed / torch CPU eager", "x",
           _vs_torch("W6.replay_per_token"), target=_vs_torch_target(1.0)),
    Figure("W6.replay_replayed_per_token", "W6 forward calls replayed per new token (later calls)", "n",
           "W6.replay_replayed_per_token"),
    Figure("W6.replay_compiles_later_calls", "W6 graphs compiled by 3 later calls, replayed", "n",
           "W6.replay_compiles_later_calls", target=none_in_any_round("0 in every round")),
    Figure("W6.generate_per_token", "W6 per new token, `xlanb.generate` (the whole decode step replayed)", "s",
           "W6.generate_per_token", None, "W6.per_token"),
    Figure("W6.generate_vs_torch", "W6 per new token, xlanb.generate / torch CPU eager", "x",
           _vs_torch("W6.generate_per_token"), target=_vs_torch_target(0.6)),
    Figure("W6.generate_compiles_later_calls", "W6 graphs compiled by 3 later calls, xlanb.generate", "n",
           "W6.generate_compiles_later_calls", target=none_in_any_round("0 in every round")),
    Figure("W6.generate_first_call", "W6 first xlanb.generate call (compiles included)", "s",
           "W6.generate_first_call", None, "W6.first_call"),
    Figure("W6.compile_per_token", "W6 per new token, forward through torch.compile", "s",
           "W6.compile_per_token", None, "W6.per_token"),
    Figure("W6.compile_vs_torch", "W6 per new token, torch.compile / torch CPU eager", "x",
           _vs_torch("W6.compile_per_token")),
    Figure("W6.compile_compiles_later_calls", "W6 graphs compiled by 3 later calls, torch.compile", "n",
           "W6.compile_compiles_later_calls", target=none_in_any_round("0 in every round")),
    Figure("W6.eager_per_token", "W6 per new token, eager mode", "s", "W6.eager_per_token", None, "W6.per_token"),
    Figure("W6.eager_vs_torch", "W6 per new token, eager mode / torch CPU eager", "x",
           _vs_torch("W6.eager_per_token")),
    Figure("W6.lazy_first_call", "W6 first generate() call, lazy (compiles included)", "s",
           "W6.lazy_first_call", None, "W6.first_call"),
    Figure("W6.lazy_compiles_first_call", "W6 graphs compiled by the first call, lazy", "n",
           "W6.lazy_compiles_first_call"),
    Figure("W6.lazy_compiles_later_calls", "W6 graphs compiled by 3 later calls, lazy", "n",
           "W6.lazy_compiles_later_calls", target=none_in_any_round("0 in every round")),
    Figure("W6.lazy_graphs_per_token", "W6 graphs executed per new token, lazy", "n", "W6.lazy_graphs_per_token"),
    Figure("W6.lazy_ops_per_token_graph", "W6 ops in the largest per-token graph, lazy", "n",
           "W6.lazy_ops_per_token_graph"),
    Figure("W6.lazy_decode_graph_sizes", "W6 distinct sizes of the per-token graphs, lazy", "n",
           "W6.lazy_decode_graph_sizes"),
    Figure("W6.eager_compiles_first_call", "W6 op executables compiled by the first call, eager", "n",
           "W6.eager_compiles_first_call"),
    Figure("W6.eager_compiles_later_calls", "W6 op executables compiled by 3 later calls, eager", "n",
           "W6.eager_compiles_later_calls", target=none_in_any_round("0 in every round")),
]


if __name__ == "__main__":
    {"torch": run_torch, "xlanb": run_xlanb}[sys.argv[1]]()
