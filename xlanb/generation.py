"""`xlanb.generate(model, input_ids, **generation_kwargs)`: HF generation with the whole decode step replayed.

`model.generate(...)` runs the model's forward and, around it, HF's Python every token (input
preparation, masks, logits processors, the stopping criteria, which read a value from the device):
on xla each token is traced again and waits for the device. Here the decode step is one function
(the forward on the static cache, the token chosen on the device, the positions and the finished
flags updated) compiled with `xlanb.compile(replay=True)`: after its first calls, a token is one
launch of one executable with no Python run and nothing read back. Every `check_every` tokens the
host starts copying the finished flags back and looks at them `check_every` tokens later (the loop
never waits for the device), stopping once every sequence has ended; the result is cut where HF's
generate would have stopped. The prompt's forward (prefill) is traced at each call (its
graphs come from the cache); the step and the state are kept per model and shape, so a later call
of the same lengths compiles nothing.

Greedy search gives HF's tokens; sampling applies HF's temperature, top-k and top-p warpers in HF's
order, on the device, and draws with xlanb's generator (`xlanb.manual_seed`): the same seed gives the
same tokens, replayed or not, and the distribution HF samples from (not HF's CPU draws).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect

import numpy as np
import torch

from xlanb.capture.realize import flush_pending, realize
from xlanb.replay import compile as replayed
from xlanb.state import runtime_state

_rt = runtime_state()
_SUPPORTED = ("max_new_tokens", "max_length", "do_sample", "temperature", "top_k", "top_p", "eos_token_id",
              "pad_token_id", "num_beams", "use_cache", "cache_implementation")


@dataclasses.dataclass(frozen=True)
class _Choice:
    """How the next token is chosen (the generation config's say, reduced to what the step traces)."""
    sample: bool
    temperature: float
    top_k: int
    top_p: float
    eos: tuple
    pad: int


def generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *, generation_config=None,
             check_every: int = 16, **kwargs) -> torch.Tensor:
    """Generates as `model.generate(input_ids, cache_implementation="static", **kwargs)` does, the model
    and its inputs on the xla device; returns the prompt and the new tokens, [batch, prompt + new]."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype != torch.long:
        raise TypeError("xlanb.generate(model, input_ids): input_ids must be a [batch, length] int64 tensor, got "
                        f"{type(input_ids).__name__}" + (f" {input_ids.dtype} of shape {list(input_ids.shape)}"
                                                         if isinstance(input_ids, torch.Tensor) else ""))
    if attention_mask is not None and not bool((attention_mask == 1).all()):
        raise NotImplementedError("xlanb.generate: a padded batch (an attention_mask with zeros) is not supported; "
                                  "generate each prompt on its own, or with model.generate")
    if not hasattr(model, "generation_config") or not hasattr(model, "config"):
        raise TypeError(f"xlanb.generate takes a HuggingFace causal LM (a transformers model with a generation "
                        f"config), got {type(model).__name__}")
    if getattr(model.config, "is_encoder_decoder", False):
        raise NotImplementedError(f"xlanb.generate runs decoder-only models; {type(model).__name__} is an "
                                  "encoder-decoder model: use model.generate")
    if type(check_every) is not int or check_every < 1:
        raise ValueError(f"xlanb.generate(check_every=...) must be a positive int, got {check_every!r}")
    cfg = _config(model, generation_config, kwargs)
    batch, prompt = input_ids.shape
    new = cfg.max_new_tokens if cfg.max_new_tokens is not None else cfg.max_length - prompt
    if new < 1:
        raise ValueError(f"xlanb.generate: nothing to generate ({new} new tokens for a prompt of {prompt}); "
                         "give max_new_tokens=N")
    device = next(model.parameters()).device
    if device.type != "xla":
        raise ValueError(f"xlanb.generate: the model is on {device}; move it first: model.to('xla')")
    input_ids = input_ids.to(device)
    choice = _choice(cfg)
    key = (batch, prompt, new, choice, next(model.parameters()).dtype)
    decoders = _rt.decoders.setdefault(model, {})
    decoder = decoders.get(key)
    if decoder is None:
        decoder = decoders[key] = _Decoder(model, batch, prompt, new, choice, device)
    with torch.no_grad():
        decoder.prefill(input_ids)
        flags = None
        for k in range(1, new):
            decoder.step()
            if choice.eos and k % check_every == 0:
                if flags is not None and flags().all():
                    break
                flags = _read_later(decoder.done)
        tokens = decoder.tokens.cpu()
    return torch.cat([input_ids.cpu(), tokens[:, :_length(tokens, choice)]], dim=1).to(device)


def _read_later(t: torch.Tensor):
    """A function returning `t`'s value (a numpy array) as it is now: a copy of it is launched and
    starts its way to the host now, and is read when asked, so the loop never waits for the device to
    finish the step it just launched (the flags are looked at `check_every` tokens later; `t` itself
    is donated to the next step)."""
    buffer = realize(t.clone(), "xlanb.generate: the finished flags").buffer
    buffer.copy_to_host_async()
    return lambda: np.asarray(buffer)


def _config(model, generation_config, kwargs):
    unknown = sorted(k for k in kwargs if k not in _SUPPORTED)
    if unknown:
        raise TypeError(f"xlanb.generate: {', '.join(unknown)} not supported (it takes {', '.join(_SUPPORTED)}); "
                        "use model.generate for the others")
    cfg = copy.deepcopy(generation_config if generation_config is not None else model.generation_config)
    cfg.update(**kwargs)
    if (cfg.num_beams or 1) != 1:
        raise NotImplementedError("xlanb.generate: beam search is not supported (num_beams=1: greedy or sampling)")
    if cfg.cache_implementation not in (None, "static"):
        raise ValueError(f"xlanb.generate runs on a static cache; cache_implementation={cfg.cache_implementation!r}")
    if cfg.max_new_tokens is None and cfg.max_length is None:
        raise ValueError("xlanb.generate: give max_new_tokens=N")
    return cfg


def _choice(cfg) -> _Choice:
    eos = cfg.eos_token_id
    eos = () if eos is None else tuple(eos) if isinstance(eos, (list, tuple)) else (int(eos),)
    pad = cfg.pad_token_id if cfg.pad_token_id is not None else (eos[0] if eos else 0)
    if not cfg.do_sample:
        return _Choice(False, 1.0, 0, 1.0, eos, int(pad))
    return _Choice(True, float(cfg.temperature if cfg.temperature is not None else 1.0), int(cfg.top_k or 0),
                   float(cfg.top_p if cfg.top_p is not None else 1.0), eos, int(pad))


def _length(tokens: torch.Tensor, choice: _Choice) -> int:
    """How many new tokens HF's generate keeps: all of them, or up to the step where the last sequence
    produced an end token (the steps after that one only ran because the flags are read in batches)."""
    if not choice.eos:
        return tokens.shape[1]
    ended = torch.isin(tokens, torch.tensor(choice.eos))
    if not bool(ended.any(dim=1).all()):
        return tokens.shape[1]
    return int(ended.int().argmax(dim=1).max()) + 1


def select(logits: torch.Tensor, choice: _Choice) -> torch.Tensor:
    """The next token of each row, [batch, 1]: greedy, or a draw from the softmax of `warp`'s scores."""
    if not choice.sample:
        return logits.argmax(dim=-1, keepdim=True)
    return torch.multinomial(warp(logits, choice).softmax(dim=-1), num_samples=1)


def warp(logits: torch.Tensor, choice: _Choice) -> torch.Tensor:
    """HF's sampling warpers in HF's order: temperature, top-k (ties with the k-th score stay), top-p
    (the smallest set of most likely tokens whose probability passes top_p; the most likely stays)."""
    scores = logits.float()
    if choice.temperature != 1.0:
        scores = scores / choice.temperature
    if choice.top_k > 0:
        k = min(choice.top_k, scores.shape[-1])
        kth = torch.topk(scores, k).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if choice.top_p < 1.0:
        ordered, order = torch.sort(scores, descending=False)
        below = ordered.softmax(dim=-1).cumsum(dim=-1) <= 1 - choice.top_p
        below[..., -1:] = False                      # the most likely token always stays
        scores = scores.masked_fill(below.scatter(-1, order, below), float("-inf"))
    return scores


def _static_cache(model, batch: int, length: int, device):
    """HF's StaticCache for `length` positions, its tensors made now (a lazily made cache makes the
    first prefill's graph differ from the later ones', two more compiles on the second call)."""
    from transformers import StaticCache
    cfg, dtype = model.config, next(model.parameters()).dtype
    cache = StaticCache(config=cfg, max_batch_size=batch, max_cache_len=length, device=device, dtype=dtype)
    if hasattr(cache, "early_initialization"):           # transformers 5: the layers' tensors are lazy
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        cache.early_initialization(batch, heads, head_dim, dtype, device)
    return cache


class _Decoder:
    """One model's generation state for one shape (batch, prompt, new tokens, choice): the static
    cache and the step's tensors, updated in place, and the two replayed functions over them."""

    def __init__(self, model, batch: int, prompt: int, new: int, choice: _Choice, device):
        self.model, self.choice, self.prompt = model, choice, prompt
        self.cache = _static_cache(model, batch, prompt + new, device)
        # the cache's keyword: `cache` in recent transformers (which warns at `past_key_values`)
        cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.with_cache = {cache_arg: self.cache, "use_cache": True}
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.index = torch.zeros(1, dtype=torch.long, device=device)
        self.tokens = torch.zeros(batch, new, dtype=torch.long, device=device)
        self.done = torch.zeros(batch, 1, dtype=torch.bool, device=device)
        self.eos = torch.tensor(choice.eos or (-1,), device=device)
        flush_pending("generate_state", "xlanb.generate: the cache and the step's tensors")   # device data now, so
        self.step = replayed(self._step, name="generate_step", replay=True)    # the first prefill is the later ones' graph

    def _emit(self, logits: torch.Tensor) -> None:
        """Chooses the next token from the last position's logits and records it (pad once a row ended)."""
        token = select(logits[:, -1, :], self.choice)
        token = torch.where(self.done, torch.full_like(token, self.choice.pad), token)
        self.tokens.index_copy_(1, self.index, token)
        self.done |= torch.isin(token, self.eos)
        self.token.copy_(token)
        self.index.add_(1)

    def prefill(self, input_ids: torch.Tensor) -> None:
        """The prompt's forward, traced at each call (HF's mask for a prompt reads a value from the device,
        which cuts a replayed body's graph: a graph cache hit, ~8 ms on W6) and launched with the first token."""
        self.cache.reset()
        self.done.zero_()
        self.index.zero_()
        positions = torch.arange(self.prompt, device=input_ids.device)
        out = self.model(input_ids=input_ids, cache_position=positions, **self.with_cache)
        self.position.fill_(self.prompt)
        self._emit(out.logits)
        flush_pending("generate_prefill", "xlanb.generate: the prompt's forward")   # one graph, every call

    def _step(self) -> None:
        out = self.model(input_ids=self.token, cache_position=self.position, **self.with_cache)
        self.position.add_(1)
        self._emit(out.logits)
