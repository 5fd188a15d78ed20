"""HF generate() with a static cache through a replayed forward (`model.forward =
xlanb.compile(model.forward, replay=True)`): the tokens are CPU's, decode steps replay, and a
second generate() call compiles nothing and replays all its decode steps."""

import pytest
import torch

import xlanb
from xlanb import events, hooks
import os, sys  # noqa: E401
sys.path.insert(0, os.path.dirname(__file__))
from test_hf_models import prompt, tiny  # noqa: E402

transformers = pytest.importorskip("transformers", reason="transformers (requirements-dev.txt) is not installed")

NEW = 12


def greedy(model, ids):
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=NEW, do_sample=False, pad_token_id=0,
                              cache_implementation="static")


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_generate_replays_the_decode_steps_with_cpu_tokens(arch):
    model = tiny(arch)
    ids = prompt()
    want = greedy(model, ids)
    dev = model.to("xla")
    dev.forward = xlanb.compile(dev.forward, replay=True)
    assert torch.equal(greedy(dev, ids.to("xla")).cpu(), want)
    mark = hooks.mark()
    assert torch.equal(greedy(dev, ids.to("xla")).cpu(), want)
    later = hooks.since(mark)
    replayed = sum(isinstance(e, events.Replay) for e in later)
    assert sum(isinstance(e, events.Compile) for e in later) == 0
    # the prefill traces (it makes the new cache's tensors); every decode step replays
    assert replayed == NEW - 1, [getattr(e, "reason", "") for e in later if "Replay" in type(e).__name__]
    reasons = [e.reason for e in later if isinstance(e, events.NotReplayable)]
    assert all("made inside the body" in r for r in reasons), reasons
