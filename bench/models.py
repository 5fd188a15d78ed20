"""The PyTorch models and training steps of W3 and W4, shared by xlanb (device "xla") and torch CPU
eager (device "cpu"): the same code runs on both. jax_workloads.py has the same models in JAX."""


import torch
import torch.nn as nn
import torch.nn.functional as F

from common import W3, W4, warmup_lr
from xlanb.selfcheck import workloads


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(W3["d_in"], W3["d_hid"]), nn.ReLU(), nn.Linear(W3["d_hid"], W3["d_out"]))


class TinyGPT(workloads.TinyGPT):
    """W4's decoder (xlanb.selfcheck.workloads defines it once, for the self-check and here)."""

    def __init__(self):
        super().__init__(W4)


def w3_setup(device):
    """(step, first batch) for W3: MLP, cross-entropy, SGD; `step()` returns the loss."""
    torch.manual_seed(0)
    model = mlp().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=W3["lr"])
    x = torch.randn(W3["batch"], W3["d_in"]).to(device)
    y = torch.randint(0, W3["d_out"], (W3["batch"],)).to(device)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def w4_setup(device, schedule_outside=False):
    """`step()` for W4: TinyGPT, cross-entropy, AdamW with a LambdaLR warm-up (stepped every step);
    with schedule_outside, (the step without the scheduler, the scheduler's step): a replayed step
    must not step a scheduler (its Python state would not advance on replayed calls)."""
    s = W4
    torch.manual_seed(0)
    model = TinyGPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], betas=s["betas"], eps=s["eps"],
                            weight_decay=s["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_lr)
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device)
    tgt = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device)
    pos = torch.arange(s["seq"]).to(device)
    mask = torch.triu(torch.full((s["seq"], s["seq"]), -1e9), diagonal=1).to(device)

    def train():
        opt.zero_grad()
        logits = model(idx, pos, mask)
        loss = F.cross_entropy(logits.view(-1, s["vocab"]), tgt.view(-1))
        loss.backward()
        opt.step()
        return loss

    def step():
        loss = train()
        sched.step()
        return loss
    return (train, sched.step) if schedule_outside else step


def w1_chain(x):
    for _ in range(500):                  # 500 x (mul, add) = 1000 elementwise ops
        x = x * 1.0001 + 0.5
    return x


def w2_ops(x, w, force):
    """The W2 mix, 8 ops x 25 = 200, calling `force()` after each op: unary, binary with a Python
    scalar, matmul, reduction, binary with a broadcast tensor, a view, an in-place op on that view."""
    for _ in range(25):
        x = torch.tanh(x)
        force()
        x = x * 1.0001
        force()
        x = x @ w
        force()
        s = x.sum(dim=0)
        force()
        x = x - s
        force()
        x = x.t()
        force()
        x.mul_(0.5)
        force()
        x = x + 0.25
        force()
    return x
