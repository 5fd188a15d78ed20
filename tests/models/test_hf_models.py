"""HuggingFace models nobody here wrote (tiny GPT-2 and Llama configs, random init): forward, 3 AdamW
steps and greedy generate() match torch on CPU; decoding with a static cache compiles a fixed set of
graphs whatever the number of new tokens; value reads in HF's code are named where they happen."""

import copy

import pytest
import torch

import xlanb
from xlanb import events, hooks
from xlanb._requirements import release
from xlanb.report import build_report
from helpers import PLATFORM, assert_close

transformers = pytest.importorskip("transformers", reason="transformers (requirements-dev.txt) is not installed")

VOCAB = 1000


def tiny(arch: str, attn: str = "sdpa"):
    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1,
                                      eos_token_id=2, attn_implementation=attn)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   attn_implementation=attn)
    return transformers.LlamaForCausalLM(cfg).eval()


def prompt(n: int = 8) -> torch.Tensor:
    return torch.randint(3, VOCAB, (1, n), generator=torch.Generator().manual_seed(1))


ARCHS = ["gpt2", "llama"]
MASK_IN_EACH_STEP = pytest.mark.skipif(
    release(transformers.__version__)[:2] < (5, 18),
    reason="transformers < 5.18: a static-cache decode step builds its attention mask from the whole 2-D mask, "
           "which grows by a column each token (a new graph each token; docs/portability.md)")


@pytest.mark.parametrize("arch", ARCHS)
def test_forward_matches_cpu(arch):
    model = tiny(arch)
    ids = prompt()
    with torch.no_grad():
        ref = model(ids, attention_mask=torch.ones_like(ids)).logits
        dev = copy.deepcopy(model).to("xla")
        out = dev(ids.to("xla"), attention_mask=torch.ones_like(ids).to("xla")).logits
    assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-5)
    assert xlanb.metrics.executed_fallback_ops() == ["aten::_local_scalar_dense"]     # the mask read only


@pytest.mark.parametrize("arch", ARCHS)
def test_three_adamw_steps_match_cpu(arch):
    cpu = tiny(arch).train()
    dev = copy.deepcopy(cpu).to("xla")
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-3)
    opt_dev = torch.optim.AdamW(dev.parameters(), lr=1e-3)
    ids = prompt(16)
    losses_cpu, losses_dev = [], []
    for step in range(3):
        for model, opt, losses, x in ((cpu, opt_cpu, losses_cpu, ids), (dev, opt_dev, losses_dev, ids.to("xla"))):
            opt.zero_grad()
            loss = model(x, labels=x).loss
            loss.backward()
            opt.step()
            xlanb.sync()
            losses.append(loss.item())
    assert_close(torch.tensor(losses_dev), torch.tensor(losses_cpu), rtol=1e-4, atol=1e-5)
    # Adam divides by sqrt(v): for the zero-initialised biases, whose gradients are tiny, float
    # rounding of the gradient moves the update by up to ~2e-5 (lr 1e-3): hence atol 5e-5
    for (name, p_dev), p_cpu in zip(dev.named_parameters(), cpu.parameters()):
        if PLATFORM == "cpu":
            assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=1e-3, atol=5e-5, msg=name)
        else:
            assert_adam_close(p_dev.detach().cpu(), p_cpu.detach(), lr=1e-3, steps=3, msg=name)


def assert_adam_close(got: torch.Tensor, want: torch.Tensor, lr: float, steps: int, msg: str) -> None:
    """Weights after `steps` Adam steps, on a platform whose arithmetic is not the CPU's. Adam's first
    update of an element is lr * g / |g|: where the CPU's gradient is within the platform's rounding of
    zero, the two may take opposite signs (the TPU v5e: 1 of GPT-2's 64,000 embedding gradients, 8.9e-9,
    and 10 weights ~lr apart after 3 steps, the other 63,990 within 1e-3). A few such elements may differ
    by up to the steps' whole movement; every other within the tolerance above."""
    off = ~torch.isclose(got, want, rtol=1e-3, atol=5e-5)
    assert off.sum() <= max(1, want.numel() // 1000), (msg, int(off.sum()), want.numel())
    assert not off.any() or (got - want)[off].abs().max() <= 2 * lr * steps, msg


def generate_both(arch: str, new_tokens: int, **kw):
    model = tiny(arch)
    ids = prompt()
    kw = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0, **kw)
    ref = model.generate(ids, **kw)
    dev = model.to("xla")
    mark = hooks.mark()
    with torch.no_grad():
        out = dev.generate(ids.to("xla"), **kw)
    return out.cpu(), ref, hooks.since(mark), dev


@pytest.mark.parametrize("arch,cache", [("gpt2", "static"), ("gpt2", "dynamic"), ("llama", "static"),
                                        ("llama", "dynamic")])
def test_greedy_generate_matches_cpu(arch, cache):
    kw = {"cache_implementation": "static"} if cache == "static" else {}
    out, ref, _, _ = generate_both(arch, 6, **kw)
    assert out.shape == (1, 14) and torch.equal(out, ref)


def model_graphs(evs):
    """(digest, nodes, cached) of each model-step execution (graphs with more than 50 ops)."""
    nodes = {e.key: e.nodes for e in evs if isinstance(e, events.Compile)}
    runs = [e for e in evs if isinstance(e, events.Execute) and not e.eager]
    return [(e.key, nodes.get(e.key), e.cached) for e in runs if nodes.get(e.key, 0) > 50]


def static_decode(arch: str, new_tokens: int):
    xlanb.reset()
    out, ref, evs, _ = generate_both(arch, new_tokens, cache_implementation="static")
    assert torch.equal(out, ref)
    return evs


@pytest.mark.parametrize("arch", ARCHS)
@MASK_IN_EACH_STEP
def test_static_cache_decode_compiles_a_fixed_set_of_graphs(arch):
    short, long = static_decode(arch, 4), static_decode(arch, 16)
    compiled = [sum(isinstance(e, events.Compile) for e in evs) for evs in (short, long)]
    assert compiled[0] == compiled[1]
    steps = model_graphs(long)
    assert len(steps) == 16                              # prefill + 15 decode steps, one graph each
    assert all(cached for _, _, cached in steps[3:])     # nothing compiles after the first 2 decode steps
    assert len({key for key, _, _ in steps[3:]}) == 1    # every later step runs the same graph


@pytest.mark.parametrize("arch", ARCHS)
@MASK_IN_EACH_STEP
def test_each_decode_step_executes_a_graph_of_bounded_size(arch):
    steps = model_graphs(static_decode(arch, 16))
    sizes = [n for _, n, _ in steps]
    assert len(set(sizes[1:])) <= 2 and max(sizes[1:]) <= sizes[0] + 10      # no growth with the step


def test_dynamic_cache_recompiles_with_the_growth_hint():
    out, ref, evs, _ = generate_both("llama", 5)
    assert torch.equal(out, ref)
    text = xlanb.debug.explain_recompiles()
    assert "a dimension grows by 1 each call" in text and 'cache_implementation="static"' in text
    hints = [c for e in evs if isinstance(e, events.Compile) and e.recompile
             for c in e.recompile.changes if c.kind == "growth"]
    assert len(hints) >= 2


def test_report_names_the_mask_read_with_its_library_frame_and_the_call_site():
    dev = tiny("llama").to("xla")
    ids = prompt().to("xla")
    mask = torch.ones_like(ids)                   # device data: its check is a real value read
    mark = hooks.mark()
    with torch.no_grad():
        dev(ids, attention_mask=mask)             # the call site
    report = build_report(hooks.since(mark))
    (forced,) = report.forced
    assert "transformers/masking_utils.py" in forced.cause and "(_ignore_causal_mask_sdpa)" in forced.cause
    assert forced.where is not None and "test_hf_models.py" in forced.where.text
    assert "dev(ids, attention_mask=mask)" in forced.where.source


def test_a_mask_derivable_from_shapes_cuts_no_graph_in_full_graph():
    model = tiny("llama")
    dev = copy.deepcopy(model).to("xla")
    ids = prompt()
    with torch.no_grad():
        with xlanb.compile(name="forward", full_graph=True):
            logits = dev(ids.to("xla"), attention_mask=torch.ones(1, 8, dtype=torch.long, device="xla")).logits
        ref = model(ids, attention_mask=torch.ones(1, 8, dtype=torch.long)).logits
    assert_close(logits.cpu(), ref, rtol=1e-4, atol=1e-5)
    report = build_report(hooks.since(0))
    assert [f.kind for f in report.forced] == ["value"]
    assert "derivable from shapes (no graph cut)" in report.forced[0].cause
