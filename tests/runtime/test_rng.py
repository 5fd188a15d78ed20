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


# Every way to give a random op a generator (by keyword, in its place as poisson's), by family; the
# *_like ops take one from torch 2.10 (before, torch itself refuses the argument)
GENERATOR_OPS = {
    "randn": lambda g: torch.randn(3, device="xla", generator=g),
    "rand": lambda g: torch.rand(3, device="xla", generator=g),
    "randint": lambda g: torch.randint(0, 5, (6,), device="xla", generator=g),
    "randperm": lambda g: torch.randperm(6, device="xla", generator=g),
    "normal_": lambda g: torch.zeros(3, device="xla").normal_(generator=g),
    "uniform_": lambda g: torch.zeros(3, device="xla").uniform_(generator=g),
    "exponential_": lambda g: torch.empty(3, device="xla").exponential_(generator=g),
    "bernoulli_": lambda g: torch.zeros(8, device="xla").bernoulli_(0.5, generator=g),
    "multinomial": lambda g: torch.multinomial(torch.ones(6, device="xla"), 3, generator=g),
    "randn_like": lambda g: torch.randn_like(torch.ones(3, device="xla"), generator=g),
    "randint_like": lambda g: torch.randint_like(torch.ones(6, device="xla"), 10, generator=g),
    "poisson": lambda g: torch.poisson(torch.full((6,), 4.0, device="xla"), generator=g),
    "init.normal_": lambda g: torch.nn.init.normal_(torch.empty(3, device="xla"), generator=g),
}
if not hasattr(torch.ops.aten.randn_like, "generator"):
    del GENERATOR_OPS["randn_like"], GENERATOR_OPS["randint_like"]


def test_a_generator_gives_its_own_reproducible_numbers_and_leaves_the_device_rng():
    """As on the CPU: an op given a torch.Generator draws from it (the same seed gives the same numbers,
    and the generator moves on), and the default RNG does not move. The numbers are xla's, not CPU's."""
    def seeded(s):
        return torch.Generator().manual_seed(s)
    for name, draw in GENERATOR_OPS.items():
        first = draw(seeded(0)).cpu()
        assert torch.equal(draw(seeded(0)).cpu(), first), name
        assert not torch.equal(draw(seeded(1)).cpu(), first), name
        g = seeded(0)
        draw(g)
        assert not torch.equal(draw(g).cpu(), first), name          # the generator moved on
    xlanb.manual_seed(5)
    plain = torch.randn(4, device="xla").cpu()
    xlanb.manual_seed(5)
    for draw in GENERATOR_OPS.values():
        draw(seeded(2))
    assert torch.equal(torch.randn(4, device="xla").cpu(), plain)


def test_a_step_that_draws_from_a_generator_is_not_replayed_with_old_numbers():
    """Its key is uploaded from the generator at each call: replay sees a new host value each call and
    runs the body, so every call draws anew, as the same loop without replay does."""
    def run(steps, replay):
        g, w = torch.Generator().manual_seed(0), torch.zeros(3, device="xla")

        def step():
            w.add_(torch.randn(3, device="xla", generator=g))
            return w
        f = xlanb.compile(step, replay=True) if replay else step
        return [f().cpu().clone() for _ in range(steps)]
    replayed, plain = run(4, True), run(4, False)
    assert all(torch.equal(a, b) for a, b in zip(replayed, plain))
    assert len({tuple(x.tolist()) for x in replayed}) == 4
