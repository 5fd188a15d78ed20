"""The device RNG: reproducible with a seed, different on every draw, never recompiling."""

import torch

import xlanb
from helpers import compiles


def test_manual_seed_reproduces_draws():
    xlanb.manual_seed(1234)
    a = torch.randn(4, device="xla").cpu()
    xlanb.manual_seed(1234)
    b = torch.randn(4, device="xla").cpu()
    assert torch.equal(a, b)


def test_torch_manual_seed_seeds_the_device_too():
    torch.manual_seed(7)
    a = torch.rand(4, device="xla").cpu()
    torch.manual_seed(7)
    b = torch.rand(4, device="xla").cpu()
    assert torch.equal(a, b)


def test_consecutive_draws_differ_and_do_not_recompile():
    torch.randn(8, device="xla")
    xlanb.sync()                 # settles the RNG state left by earlier draws
    xlanb.metrics.clear_all()
    draws = []
    for _ in range(3):
        r = torch.randn(8, device="xla")
        xlanb.sync()
        draws.append(r.cpu())
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
    assert compiles() == 1


def test_dropout_statistics():
    x = torch.ones(20000, device="xla")
    y = torch.nn.functional.dropout(x, p=0.25, training=True).cpu()
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.02
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / 0.75))
