"""The self-check's models: a small MLP for the parity rows, and W3 and W4 (docs/performance.md) in
PyTorch and in pure JAX, small copies of bench/models.py and bench/jax_models.py (bench/ is not part
of the installed package).

W3: MLP 784-512-10, batch 64, ReLU, cross-entropy, SGD. W4: a decoder-only transformer (pre-LayerNorm
blocks, attention written out), cross-entropy, AdamW with a constant learning rate. The torch step
and the JAX step do the same arithmetic; their weights come from different generators, since only
the time of a step is compared. Each side uses its own default integer type for token ids and labels
(torch int64, JAX int32), as a user of each would.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

W3 = dict(batch=64, d_in=784, d_hid=512, d_out=10, lr=0.01)
W4 = dict(layers=2, d_model=256, heads=4, seq=128, batch=8, vocab=1000, d_ff=1024, lr=1e-3)
W4_QUICK = dict(W4, seq=64, batch=4)        # --quick (the default on a CPU): a quarter of the tokens
ADAMW = dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


# PyTorch ------------------------------------------------------------------------------------

def small_mlp(seed: int = 0) -> nn.Module:
    """The parity rows' model: 32-64-10, on the CPU, the same weights for a given seed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


def small_batch(device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 32, generator=g).to(device), torch.randint(0, 10, (16,), generator=g).to(device)


def sgd_step(model: nn.Module, lr: float = 0.1):
    """step(x, y) -> the loss, detached: one SGD step of cross-entropy."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


class Block(nn.Module):
    """Pre-LayerNorm decoder block; attention written out (softmax of masked scores)."""

    def __init__(self, d: int, heads: int, d_ff: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + mask
        attn = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(attn)
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, s: dict):
        super().__init__()
        self.tok, self.pos = nn.Embedding(s["vocab"], s["d_model"]), nn.Embedding(s["seq"], s["d_model"])
        self.blocks = nn.ModuleList(Block(s["d_model"], s["heads"], s["d_ff"]) for _ in range(s["layers"]))
        self.lnf, self.head = nn.LayerNorm(s["d_model"]), nn.Linear(s["d_model"], s["vocab"])

    def forward(self, idx, pos, mask):
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.lnf(x))


def w3_torch(device):
    """(step, x, y): W3's training step (returns the loss, detached) and its batch on `device`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(W3["d_in"], W3["d_hid"]), nn.ReLU(), nn.Linear(W3["d_hid"], W3["d_out"]))
        x, y = torch.randn(W3["batch"], W3["d_in"]), torch.randint(0, W3["d_out"], (W3["batch"],))
    return sgd_step(model.to(device), W3["lr"]), x.to(device), y.to(device)


def w4_torch(device, s: dict):
    """(step, idx, tgt): W4's training step with AdamW (returns the loss, detached) and its batch."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = TinyGPT(s).to(device)
        idx, tgt = (torch.randint(0, s["vocab"], (s["batch"], s["seq"])) for _ in range(2))
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], **ADAMW)
    pos = torch.arange(s["seq"]).to(device)
    mask = torch.triu(torch.full((s["seq"], s["seq"]), -1e9), diagonal=1).to(device)

    def step(idx, tgt):
        opt.zero_grad()
        loss = F.cross_entropy(model(idx, pos, mask).view(-1, s["vocab"]), tgt.view(-1))
        loss.backward()
        opt.step()
        return loss.detach()
    return step, idx.to(device), tgt.to(device)


# Pure JAX -----------------------------------------------------------------------------------

def _linear_init(rng: np.random.Generator, d_in: int, d_out: int) -> dict:
    """torch.nn.Linear's initialisation and [out, in] layout, drawn with numpy (jax.random op by op
    would compile a program per shape: seconds on a CPU)."""
    bound = 1.0 / math.sqrt(d_in)
    return {"w": rng.uniform(-bound, bound, (d_out, d_in)).astype(np.float32),
            "b": rng.uniform(-bound, bound, (d_out,)).astype(np.float32)}


def _linear(p, x):
    return x @ p["w"].T + p["b"]


def _cross_entropy(logits, labels):
    picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)


def _layer_norm(p, x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["w"] + p["b"]


def _mlp_loss(p, x, y):
    return _cross_entropy(_linear(p["fc2"], jax.nn.relu(_linear(p["fc1"], x))), y)


def _gpt_init(rng: np.random.Generator, s: dict) -> dict:
    d = s["d_model"]

    def ln():
        return {"w": np.ones((d,), np.float32), "b": np.zeros((d,), np.float32)}
    blocks = [{"ln1": ln(), "qkv": _linear_init(rng, d, 3 * d), "proj": _linear_init(rng, d, d), "ln2": ln(),
               "ff1": _linear_init(rng, d, s["d_ff"]), "ff2": _linear_init(rng, s["d_ff"], d)}
              for _ in range(s["layers"])]
    return {"tok": rng.standard_normal((s["vocab"], d), np.float32),
            "pos": rng.standard_normal((s["seq"], d), np.float32),
            "blocks": blocks, "lnf": ln(), "head": _linear_init(rng, d, s["vocab"])}


def _gpt_loss(p, idx, tgt, heads):
    b, t = idx.shape
    d = p["tok"].shape[1]
    mask = jnp.triu(jnp.full((t, t), -1e9, jnp.float32), k=1)
    x = p["tok"][idx] + p["pos"][jnp.arange(t)]

    def split(z):
        return z.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)
    for blk in p["blocks"]:
        q, k, v = (split(z) for z in jnp.split(_linear(blk["qkv"], _layer_norm(blk["ln1"], x)), 3, axis=-1))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads) + mask
        attn = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
        x = x + _linear(blk["proj"], attn)
        x = x + _linear(blk["ff2"], jax.nn.gelu(_linear(blk["ff1"], _layer_norm(blk["ln2"], x)), approximate=False))
    return _cross_entropy(_linear(p["head"], _layer_norm(p["lnf"], x)), tgt)


def w3_jax(device):
    """step() -> the loss (a jax.Array, not waited for): W3 jitted, parameters donated, on `device`."""
    rng = np.random.default_rng(0)
    params = {"fc1": _linear_init(rng, W3["d_in"], W3["d_hid"]), "fc2": _linear_init(rng, W3["d_hid"], W3["d_out"])}
    x = rng.standard_normal((W3["batch"], W3["d_in"]), np.float32)
    y = rng.integers(0, W3["d_out"], (W3["batch"],), np.int32)
    params, x, y = jax.device_put((params, x, y), device)

    def sgd(p, x, y):
        loss, grads = jax.value_and_grad(_mlp_loss)(p, x, y)
        return jax.tree.map(lambda a, g: a - W3["lr"] * g, p, grads), loss
    sgd = jax.jit(sgd, donate_argnums=(0,))

    def step():
        nonlocal params
        params, loss = sgd(params, x, y)
        return loss
    return step


def w4_jax(device, s: dict):
    """step() -> the loss (not waited for): W4 jitted with AdamW by hand (torch.optim.AdamW's rule)."""
    rng = np.random.default_rng(0)
    params = _gpt_init(rng, s)
    state = {"params": params, "m": jax.tree.map(np.zeros_like, params), "v": jax.tree.map(np.zeros_like, params)}
    idx, tgt = (rng.integers(0, s["vocab"], (s["batch"], s["seq"]), np.int32) for _ in range(2))
    state, idx, tgt = jax.device_put((state, idx, tgt), device)
    (b1, b2), eps, decay, lr = ADAMW["betas"], ADAMW["eps"], ADAMW["weight_decay"], s["lr"]

    def adamw(state, t, idx, tgt):
        loss, grads = jax.value_and_grad(_gpt_loss)(state["params"], idx, tgt, s["heads"])
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)

        def update(p, m, v):
            return p * (1 - lr * decay) - (lr / c1) * m / (jnp.sqrt(v) / jnp.sqrt(c2) + eps)
        return {"params": jax.tree.map(update, state["params"], m, v), "m": m, "v": v}, loss
    adamw = jax.jit(adamw, donate_argnums=(0,))
    count = 0

    def step():
        nonlocal state, count
        count += 1
        state, loss = adamw(state, np.float32(count), idx, tgt)
        return loss
    return step
