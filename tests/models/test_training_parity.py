"""Training on xla matches torch on CPU: same losses and parameters after several steps."""

import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import xlanb
from helpers import assert_close, compiles

STEPS = 6


def assert_params_close(model_xla, model_cpu, rtol=1e-3, atol=1e-5):
    for (name, p_xla), p_cpu in zip(model_xla.named_parameters(), model_cpu.parameters()):
        assert_close(p_xla.detach().cpu(), p_cpu.detach(), rtol=rtol, atol=atol, msg=name)


def train_both(model, make_opt, batches, loss_fn, make_sched=None, sync_compiles=None):
    """Runs the same steps on CPU and on xla; returns both loss lists."""
    cpu = model
    dev = copy.deepcopy(model).to("xla")
    opt_cpu, opt_dev = make_opt(cpu.parameters()), make_opt(dev.parameters())
    sched_cpu = make_sched(opt_cpu) if make_sched else None
    sched_dev = make_sched(opt_dev) if make_sched else None
    losses_cpu, losses_dev = [], []
    for step, batch in enumerate(batches):
        for m, opt, sched, losses, device in ((cpu, opt_cpu, sched_cpu, losses_cpu, "cpu"),
                                              (dev, opt_dev, sched_dev, losses_dev, "xla")):
            inputs = [t.to(device) for t in batch]
            opt.zero_grad()
            loss = loss_fn(m, *inputs)
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            if device == "xla":
                xlanb.sync()
                if sync_compiles is not None:
                    sync_compiles.append(compiles())
            losses.append(loss.item())
    return cpu, dev, losses_cpu, losses_dev


@pytest.mark.parametrize("foreach", [False, True])
def test_mlp_sgd_momentum(foreach):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    batches = [(torch.randn(16, 20), torch.randint(0, 5, (16,))) for _ in range(STEPS)]
    cpu, dev, lc, ld = train_both(
        model, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=foreach), batches,
        lambda m, x, y: F.cross_entropy(m(x), y))
    assert_close(torch.tensor(ld), torch.tensor(lc), rtol=1e-3, atol=1e-5)
    assert_params_close(dev, cpu)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 2 * 2, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def test_cnn_batchnorm_sgd():
    torch.manual_seed(0)
    model = SmallCNN()
    batches = [(torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))) for _ in range(STEPS)]
    cpu, dev, lc, ld = train_both(model, lambda p: torch.optim.SGD(p, lr=0.05), batches,
                                  lambda m, x, y: F.cross_entropy(m(x), y))
    assert_close(torch.tensor(ld), torch.tensor(lc), rtol=1e-3, atol=1e-5)
    assert_params_close(dev, cpu)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_close(getattr(dev.bn1, name).cpu(), getattr(cpu.bn1, name), rtol=1e-3, atol=1e-5)
    dev.eval()
    cpu.eval()
    x = torch.randn(2, 3, 8, 8)
    assert_close(dev(x.to("xla")).cpu(), cpu(x), rtol=1e-3, atol=1e-4)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        # no qkv bias: the key bias has an exactly zero gradient, and Adam turns float noise in a
        # zero gradient into +-lr steps whose sign no two implementations need agree on
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


class TinyGPT(nn.Module):
    """Decoder-only, 2 layers, tied input/output embeddings."""

    def __init__(self, vocab=64, d=32, heads=4, layers=2, seq=16):
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


def gpt_loss(model, idx, target):
    logits = model(idx)
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))


@pytest.mark.parametrize("foreach", [False, True])
def test_gpt_adamw_lambdalr_compiles_nothing_after_step_2(foreach):
    torch.manual_seed(0)
    model = TinyGPT()
    batches = [(torch.randint(0, 64, (4, 16)), torch.randint(0, 64, (4, 16))) for _ in range(STEPS)]
    compile_counts = []
    cpu, dev, lc, ld = train_both(
        model, lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.1, foreach=foreach), batches, gpt_loss,
        make_sched=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0 / math.sqrt(s + 1)),
        sync_compiles=compile_counts)
    assert_close(torch.tensor(ld), torch.tensor(lc), rtol=1e-3, atol=1e-5)
    assert_params_close(dev, cpu)
    assert dev.head.weight is dev.tok.weight
    assert compile_counts[-1] == compile_counts[1], f"compiles per step: {compile_counts}"


def test_adam_per_tensor_matches():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    batches = [(torch.randn(8, 8), torch.randn(8, 1)) for _ in range(STEPS)]
    cpu, dev, lc, ld = train_both(model, lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False), batches,
                                  lambda m, x, y: F.mse_loss(m(x), y))
    assert_close(torch.tensor(ld), torch.tensor(lc), rtol=1e-3, atol=1e-5)
    assert_params_close(dev, cpu)
