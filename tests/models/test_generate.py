"""xlanb.generate: HF generation with the whole decode step replayed. Greedy gives HF's generate() tokens on
CPU (with end tokens and a batch whose rows end at different steps), a second call of the same lengths
compiles nothing and replays every step, sampling applies HF's warpers and gives the same tokens for the
same seed replayed or traced, and bad arguments (and models it does not run) are refused before anything
runs. GPT-2, Qwen2, Mistral and Gemma tiny configs gave HF's greedy tokens too when tried by hand."""

import copy

import pytest
import torch

import xlanb
from xlanb import events, generation, hooks
from helpers import assert_close

transformers = pytest.importorskip("transformers", reason="transformers (requirements-dev.txt) is not installed")

VOCAB = 1000
NEW = 12


def tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   attn_implementation="sdpa")
    return transformers.LlamaForCausalLM(cfg).eval()


def prompts(batch: int = 1, n: int = 8) -> torch.Tensor:
    return torch.randint(3, VOCAB, (batch, n), generator=torch.Generator().manual_seed(1))


def hf_generate(model, ids, **kwargs):
    with torch.no_grad():
        return model.generate(ids, cache_implementation="static", pad_token_id=0, **kwargs)


@pytest.fixture(scope="module")
def models():
    cpu = tiny_llama()
    return cpu, copy.deepcopy(cpu).to("xla")


def test_greedy_gives_hfs_tokens_and_a_second_call_compiles_nothing(models):
    cpu, dev = models
    ids = prompts()
    expected = hf_generate(cpu, ids, max_new_tokens=NEW, do_sample=False, eos_token_id=None)
    got = xlanb.generate(dev, ids.to("xla"), max_new_tokens=NEW, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert got.device.type == "xla" and torch.equal(got.cpu(), expected)
    mark = hooks.mark()
    again = xlanb.generate(dev, ids.to("xla"), max_new_tokens=NEW, do_sample=False, eos_token_id=None, pad_token_id=0)
    found = hooks.since(mark)
    assert torch.equal(again.cpu(), expected)
    assert sum(isinstance(e, events.Compile) for e in found) == 0
    assert sum(isinstance(e, events.Replay) and e.name == "generate_step" for e in found) == NEW - 1


def test_end_tokens_stop_and_pad_as_hf_does(models):
    cpu, dev = models
    ids = prompts(batch=2)
    free = hf_generate(cpu, ids, max_new_tokens=NEW, do_sample=False, eos_token_id=None)
    eos = int(free[1, ids.shape[1] + 3])          # row 1 ends at its 4th new token; row 0 ends later or never
    expected = hf_generate(cpu, ids, max_new_tokens=NEW, do_sample=False, eos_token_id=eos)
    for check_every in (1, 2, 16):                # how often the flags are read changes nothing
        got = xlanb.generate(dev, ids.to("xla"), max_new_tokens=NEW, do_sample=False, eos_token_id=eos,
                             pad_token_id=0, check_every=check_every)
        assert torch.equal(got.cpu(), expected), check_every


def test_all_rows_ending_early_cut_the_result_where_hf_stops(models):
    cpu, dev = models
    ids = prompts()
    free = hf_generate(cpu, ids, max_new_tokens=NEW, do_sample=False, eos_token_id=None)
    eos = int(free[0, ids.shape[1] + 2])
    expected = hf_generate(cpu, ids, max_new_tokens=NEW, do_sample=False, eos_token_id=eos)
    assert expected.shape[1] < ids.shape[1] + NEW
    got = xlanb.generate(dev, ids.to("xla"), max_new_tokens=NEW, do_sample=False, eos_token_id=eos, pad_token_id=0,
                         check_every=2)
    assert torch.equal(got.cpu(), expected)


def test_sampling_gives_the_same_tokens_for_the_same_seed_replayed_or_traced(models):
    _, dev = models
    ids = prompts().to("xla")
    kwargs = dict(max_new_tokens=NEW, do_sample=True, temperature=0.7, top_k=40, top_p=0.9, eos_token_id=None,
                  pad_token_id=0)
    runs = []
    for _ in range(3):                            # the first call traces the step, the later ones replay it
        xlanb.manual_seed(5)
        runs.append(xlanb.generate(dev, ids, **kwargs).cpu())
    decoder = next(d for k, d in xlanb.runtime_state().decoders[dev].items() if k[3].sample)
    replayed = decoder.step
    decoder.step = decoder._step                  # traced every step, as a script without replay runs
    try:
        xlanb.manual_seed(5)
        traced = xlanb.generate(dev, ids, **kwargs).cpu()
    finally:
        decoder.step = replayed
    assert all(torch.equal(r, traced) for r in runs)
    xlanb.manual_seed(6)
    assert not torch.equal(xlanb.generate(dev, ids, **kwargs).cpu(), traced)       # a seed is a seed


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.7, 0, 1.0), (1.0, 5, 1.0), (1.0, 0, 0.8), (1.3, 20, 0.6)])
def test_the_warpers_keep_hfs_tokens_with_hfs_probabilities(temperature, top_k, top_p):
    from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)
    torch.manual_seed(0)
    logits = torch.randn(3, VOCAB) * 3
    logits[0, :4] = 5.0                           # ties at the k-th score
    hf = LogitsProcessorList()
    if temperature != 1.0:
        hf.append(TemperatureLogitsWarper(temperature))
    if top_k:
        hf.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        hf.append(TopPLogitsWarper(top_p))
    expected = hf(None, logits.clone()).softmax(dim=-1)
    choice = generation._Choice(True, temperature, top_k, top_p, (), 0)
    got = generation.warp(logits.to("xla"), choice).softmax(dim=-1).cpu()
    assert torch.equal(got == 0, expected == 0)
    assert_close(got, expected)


def test_bad_arguments_are_refused_before_anything_runs(models):
    cpu, dev = models
    ids = prompts().to("xla")
    with pytest.raises(ValueError, match="the model is on cpu; move it first"):
        xlanb.generate(cpu, ids, max_new_tokens=2)
    with pytest.raises(TypeError, match="takes a HuggingFace causal LM"):
        xlanb.generate(torch.nn.Linear(2, 2).to("xla"), ids, max_new_tokens=2)
    t5 = transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=VOCAB, d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8, decoder_start_token_id=0))
    with pytest.raises(NotImplementedError, match="T5ForConditionalGeneration is an encoder-decoder model"):
        xlanb.generate(t5.to("xla"), ids, max_new_tokens=2)
    with pytest.raises(TypeError, match="input_ids must be a \\[batch, length\\] int64 tensor"):
        xlanb.generate(dev, ids.float(), max_new_tokens=2)
    with pytest.raises(TypeError, match="num_return_sequences not supported"):
        xlanb.generate(dev, ids, max_new_tokens=2, num_return_sequences=2)
    with pytest.raises(NotImplementedError, match="beam search"):
        xlanb.generate(dev, ids, max_new_tokens=2, num_beams=2)
    with pytest.raises(NotImplementedError, match="padded batch"):
        xlanb.generate(dev, ids, torch.zeros_like(ids), max_new_tokens=2)
    with pytest.raises(ValueError, match="check_every"):
        xlanb.generate(dev, ids, max_new_tokens=2, check_every=0)
    with pytest.raises(ValueError, match="max_new_tokens"):            # HF's own check of its config
        xlanb.generate(dev, ids, max_new_tokens=0)
    with pytest.raises(ValueError, match="nothing to generate"):
        xlanb.generate(dev, ids, max_length=ids.shape[1])
