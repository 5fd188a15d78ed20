"""Models and helpers the multi-device programs share (imported inside their subprocess)."""

import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import xlanb


def report(**values) -> None:
    print("RESULT " + json.dumps(values), flush=True)


def compiles() -> int:
    data = xlanb.metrics.metric_data("CompileTime")
    return 0 if data is None else data[0]


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))


def max_diff(a, b) -> float:
    return max(float((x.detach().cpu() - y.detach().cpu()).abs().max()) for x, y in zip(a, b))


class Block(nn.Module):
    """Notebook 04's transformer block."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


class TinyGPT(nn.Module):
    """Notebook 04's small decoder-only transformer (tied embeddings)."""

    def __init__(self, vocab=128, d=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        nn.init.normal_(self.tok.weight, std=0.02)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


__all__ = ["report", "compiles", "mlp", "max_diff", "TinyGPT", "math"]
