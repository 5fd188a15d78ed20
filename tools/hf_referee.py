"""HuggingFace architectures nobody here wrote, trained on xla against torch CPU: a referee.

    python tools/hf_referee.py [--modes eager,lazy,compare] [--timeout S] [NAME ...]   # every architecture by default

Each architecture is built from a tiny config (2 layers, width 32, dropout 0, random init from one
seed) with inputs that exercise its own paths (a padding mask, token types, relative position
buckets, ALiBi, a sliding window, images, mel features, a contrastive loss). One fresh process per
architecture and mode (`eager`: each op runs as it is called, the notebook's default; `lazy`: a
sync per step) copies the CPU model to xla and runs two SGD steps (momentum 0.9) on both, then
compares the losses, the first step's gradients and every parameter and buffer after the steps
(BatchNorm's running statistics included) with `torch.testing.assert_close(rtol=1e-4, atol=1e-5)`.
Mode `compare` runs one forward and backward under `xlanb.compare()` (lazy, torch's tolerances) and
passes when no op is `introduced`: a referee for compare itself, which must find no divergence in a
model xlanb computes correctly.

SGD, not Adam: a gradient that is zero in exact arithmetic (an attention key's bias: softmax does
not see a constant added to every score) comes out of both devices as rounding noise of 1e-10 to
1e-8, which Adam's division by its root mean square turns into updates of about its learning rate,
different on each device (and on CPU between two attention paths). One line per run; the exit
status is 1 when a run fails. docs/torch_suites.md has the last results.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import time

B, S, V = 2, 12, 200            # batch, sequence, vocabulary
STEPS = 2


def _gen(seed: int = 1):
    import torch
    return torch.Generator().manual_seed(seed)


def _ids(n: int = S, vocab: int = V):
    import torch
    return torch.randint(3, vocab, (B, n), generator=_gen())


def _mask(n: int = S, left: bool = False):
    """The second row padded: its last 3 positions (its first 3 with `left`)."""
    import torch
    m = torch.ones(B, n, dtype=torch.long)
    m[1, slice(0, 3) if left else slice(n - 3, n)] = 0
    return m


def _pixels():
    import torch
    return torch.randn(B, 3, 32, 32, generator=_gen(2))


def _features():
    import torch
    return torch.randn(B, 8, 16, generator=_gen(3))      # mel bins x frames


def _labels(*values):
    import torch
    return torch.tensor(values)


def _lm(seq: int = S, mask=None):
    x = _ids(seq)
    return dict(input_ids=x, labels=x.clone(), **({"attention_mask": mask} if mask is not None else {}))


def _mlm():
    import torch
    x = _ids()
    types = torch.zeros(B, S, dtype=torch.long)
    types[:, S // 2:] = 1
    labels = torch.full((B, S), -100)
    labels[:, 1::3] = x[:, 1::3]
    return dict(input_ids=x, attention_mask=_mask(), token_type_ids=types, labels=labels)


def _clip():
    import torch
    x = torch.randint(3, 100, (B, 10), generator=_gen())
    x[0, 7], x[1, 9] = 2, 2             # the end tokens its pooling picks
    mask = torch.ones(B, 10, dtype=torch.long)
    mask[0, 8:] = 0
    return dict(input_ids=x, attention_mask=mask, pixel_values=_pixels(), return_loss=True)


_DEC = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, attention_dropout=0.0)
_ENC_DEC = dict(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0,
                attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0)
_VISION = dict(image_size=32, num_channels=3, num_labels=5)

# name: (model class, config class, config, inputs)
ARCHITECTURES = {
    "bert": ("BertForMaskedLM", "BertConfig", dict(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=32, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
        _mlm),
    "distilbert": ("DistilBertForSequenceClassification", "DistilBertConfig", dict(
        vocab_size=V, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=32, dropout=0.0,
        attention_dropout=0.0, seq_classif_dropout=0.0, num_labels=3),
        lambda: dict(input_ids=_ids(), attention_mask=_mask(), labels=_labels(0, 2))),
    "t5": ("T5ForConditionalGeneration", "T5Config", dict(
        vocab_size=V, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=2,
        dropout_rate=0.0, relative_attention_num_buckets=8, relative_attention_max_distance=16,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
        lambda: dict(input_ids=_ids(), attention_mask=_mask(), labels=_ids(8))),
    "bart": ("BartForConditionalGeneration", "BartConfig", dict(
        _ENC_DEC, max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2, forced_eos_token_id=None),
        lambda: dict(input_ids=_ids(), attention_mask=_mask(), labels=_ids(8))),
    "whisper": ("WhisperForConditionalGeneration", "WhisperConfig", dict(
        _ENC_DEC, num_mel_bins=8, max_source_positions=8, max_target_positions=16, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None,
        begin_suppress_tokens=None),
        lambda: dict(input_features=_features(), labels=_ids(6))),
    "debertav2": ("DebertaV2ForSequenceClassification", "DebertaV2Config", dict(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64, relative_attention=True, position_buckets=16, max_relative_positions=-1,
        pos_att_type=["p2c", "c2p"], type_vocab_size=0, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, pooler_dropout=0.0, num_labels=3),
        lambda: dict(input_ids=_ids(), attention_mask=_mask(), labels=_labels(0, 2))),
    "vit": ("ViTForImageClassification", "ViTConfig", dict(
        _VISION, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
        lambda: dict(pixel_values=_pixels(), labels=_labels(1, 4))),
    "resnet": ("ResNetForImageClassification", "ResNetConfig", dict(
        num_channels=3, num_labels=5, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"),
        lambda: dict(pixel_values=_pixels(), labels=_labels(1, 4))),
    "convnext": ("ConvNextForImageClassification", "ConvNextConfig", dict(
        _VISION, patch_size=4, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, drop_path_rate=0.0),
        lambda: dict(pixel_values=_pixels(), labels=_labels(1, 4))),
    "swin": ("SwinForImageClassification", "SwinConfig", dict(
        _VISION, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, mlp_ratio=2.0,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0),
        lambda: dict(pixel_values=_pixels(), labels=_labels(1, 4))),
    "clip": ("CLIPModel", "CLIPConfig", dict(
        text_config=dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=16, attention_dropout=0.0, eos_token_id=2),
        vision_config=dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=2, attention_dropout=0.0),
        projection_dim=16),
        _clip),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", _DEC, _lm),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(_DEC, sliding_window=4), lambda: _lm(16)),
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(_DEC, head_dim=8), _lm),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(_DEC, head_dim=8, sliding_window=4), lambda: _lm(16)),
    "phi": ("PhiForCausalLM", "PhiConfig", dict(
        _DEC, num_key_value_heads=4, partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0), _lm),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(_DEC, resid_pdrop=0.0, embd_pdrop=0.0, pad_token_id=0), _lm),
    "gptneox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        rotary_pct=0.25, max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0), _lm),
    "bloom": ("BloomForCausalLM", "BloomConfig", dict(
        vocab_size=V, hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0),
        lambda: _lm(mask=_mask(left=True))),
    "opt": ("OPTForCausalLM", "OPTConfig", dict(
        vocab_size=V, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, layerdrop=0.0, pad_token_id=1, bos_token_id=2, eos_token_id=2), _lm),
}


def build(name: str):
    """(model in train mode, inputs on CPU) for one architecture."""
    import torch
    import transformers
    model_class, config_class, config, inputs = ARCHITECTURES[name]
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))
    return model.train(), inputs()


def twin(model):
    """The model's copy on the xla device."""
    return copy.deepcopy(model).to("xla")


def train(model, inputs: dict, sync) -> tuple[list[float], dict]:
    """STEPS SGD steps: the losses and the first step's gradients (on CPU)."""
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, grads = [], {}
    for step in range(STEPS):
        loss = model(**inputs).loss
        loss.backward()
        if step == 0:
            grads = {k: p.grad.cpu() for k, p in model.named_parameters() if p.grad is not None}
        opt.step()
        opt.zero_grad()
        sync()
        losses.append(loss.item())
    return losses, grads


def run_one(name: str, mode: str) -> dict:
    """One architecture in one mode, against its CPU twin: {'status', 'failed', ...}."""
    import xlanb
    if mode == "compare":
        return _compare_region(name)
    with xlanb.eager_mode_context(mode == "eager"):
        return _compare(name, mode)


def _compare_region(name: str) -> dict:
    """A forward and backward under xlanb.compare(): no op may be introduced."""
    import torch
    import xlanb
    cpu, inputs = build(name)
    dev = twin(cpu)
    device_inputs = {k: v.to("xla") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    start = time.perf_counter()
    with xlanb.compare() as cmp:
        dev(**device_inputs).loss.backward()
    statuses = {s: sum(r.status == s for r in cmp.rows) for s in ("ok", "inherited", "introduced")}
    first = cmp.first_divergence
    failed = {} if first is None else {
        "first divergence": f"{first.op} in '{first.module}' ({first.phase}), max abs {first.max_abs:.2g}"}
    return {"status": "mismatch" if failed else "pass", "failed": failed, "statuses": statuses,
            "not_compared": cmp.skipped, "seconds": round(time.perf_counter() - start, 2)}


def _compare(name: str, mode: str) -> dict:
    import torch
    import xlanb
    cpu, inputs = build(name)
    dev = twin(cpu)
    start = time.perf_counter()
    losses_cpu, grads_cpu = train(cpu, inputs, lambda: None)
    device_inputs = {k: v.to("xla") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    losses, grads = train(dev, device_inputs, xlanb.sync if mode == "lazy" else lambda: None)
    seconds = time.perf_counter() - start
    pairs = [("loss", torch.tensor(losses), torch.tensor(losses_cpu))]
    pairs += [(f"grad {k}", grads.get(k), g) for k, g in grads_cpu.items()]
    state = dev.state_dict()
    pairs += [(k, state[k].cpu(), v) for k, v in cpu.state_dict().items()]
    failed = {}
    for what, got, want in pairs:
        try:
            if got is None:
                raise AssertionError("no gradient on xla")
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        except AssertionError as e:
            failed[what] = str(e).strip().splitlines()[0][:200]
    worst = max((float((got.double() - want.double()).abs().max()) for _, got, want in pairs
                 if got is not None and got.numel() and got.is_floating_point()), default=0.0)
    return {"status": "mismatch" if failed else "pass", "failed": failed, "compared": len(pairs),
            "largest_difference": worst, "seconds": round(seconds, 2),
            "fallbacks": xlanb.metrics.executed_fallback_ops()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"architectures (default: all of {', '.join(ARCHITECTURES)})")
    parser.add_argument("--modes", default="eager,lazy,compare")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per process")
    parser.add_argument("--one", nargs=2, metavar=("NAME", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run_one(*args.one)))
        return 0
    unknown = [n for n in args.names if n not in ARCHITECTURES]
    if unknown:
        parser.error(f"unknown architectures {unknown}; known: {', '.join(ARCHITECTURES)}")
    failures = 0
    for name in args.names or ARCHITECTURES:
        for mode in args.modes.split(","):
            try:
                out = subprocess.run([sys.executable, __file__, "--one", name, mode], capture_output=True, text=True,
                                     timeout=args.timeout)
                lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
                result = json.loads(lines[-1][7:]) if lines else {
                    "status": "error", "failed": {"process": (out.stderr.strip().splitlines() or ["no output"])[-1]}}
            except subprocess.TimeoutExpired:
                result = {"status": "timeout", "failed": {"process": f"over {args.timeout} s"}}
            failures += result["status"] != "pass"
            detail = (f"{result['compared']} tensors, largest difference {result['largest_difference']:.1e}, "
                      f"{result['seconds']} s on both, fallbacks {result['fallbacks']}" if "compared" in result
                      else f"rows {result['statuses']}, {result['not_compared']} not compared, {result['seconds']} s"
                      if "statuses" in result else "")
            print(f"{name:10s} {mode:5s} {result['status']:8s} {detail}", flush=True)
            for what, why in result["failed"].items():
                print(f"    {what}: {why}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
