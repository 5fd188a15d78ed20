"""A first training step imports only what it uses: no DTensor, no dynamo, no inductor, no sympy
unless sharding, torch.compile or symbolic shapes are used (each costs 0.4-1 s of the first step)."""

import json
import subprocess
import sys
import textwrap

import torch

from xlanb.capture import nodynamo

# imported by torch itself on the first __torch_dispatch__ (torch.distributed.tensor), the first
# optimizer.step() (torch._dynamo, which imports torch._inductor) and the first meta kernel
# (sympy, through torch._check and elementwise_dtypes); capture/nodtensor.py, capture/nodynamo.py
# and capture/nosympy.py keep them out
HEAVY = ("torch.distributed.tensor", "torch._dynamo", "torch._inductor", "sympy")
# not listed: jax.experimental.multihost_utils, which jax's own device_put imports (about 2 ms, pure
# JAX too)
XLANB_UNUSED = ("xlanb.dynamo", "xlanb.notebook")


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


MLP_STEP = """
    import json, sys
    import torch, torch.nn as nn, torch.nn.functional as F
    import xlanb

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)).to("xla")
    opt = torch.optim.{optimizer}(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 784).to("xla"), torch.randint(0, 10, (64,)).to("xla")
    step = {wrap}

    def body():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    for _ in range(2):
        loss = step(body)()
        xlanb.sync(wait=True)
    print(json.dumps({{"loss": loss.item(), "modules": sorted(m for m in {watch} if m in sys.modules)}}))
"""


def imported_by_step(optimizer="SGD", wrap="lambda f: f") -> dict:
    return run(MLP_STEP.format(optimizer=optimizer, wrap=wrap, watch=HEAVY + XLANB_UNUSED))


def test_an_mlp_sgd_step_imports_no_dtensor_dynamo_or_inductor():
    out = imported_by_step()
    assert out["modules"] == []
    assert 0 < out["loss"] < 10


def test_an_adamw_step_under_xlanb_compile_imports_none_of_them_either():
    assert imported_by_step("AdamW", "lambda f: xlanb.compile(f, name='step')")["modules"] == []


def test_a_transformer_step_imports_none_of_them_either():
    """W4's decoder (attention, LayerNorm, GELU, embeddings) with AdamW, lazy and in eager mode."""
    out = run(f"""
        import json, sys, torch, xlanb
        from xlanb.selfcheck import workloads
        step, idx, tgt = workloads.w4_torch("xla", workloads.W4_QUICK)
        losses = []
        for eager in (False, True):
            with xlanb.eager_mode_context(eager):
                losses.append(step(idx, tgt).item())
        print(json.dumps({{"losses": losses, "modules": sorted(m for m in {HEAVY + XLANB_UNUSED} if m in sys.modules)}}))
    """)
    assert out["modules"] == []
    assert all(0 < loss < 20 for loss in out["losses"])


def test_the_step_gives_the_same_loss_as_cpu():
    """The optimizer wrapper xlanb swaps in (no dynamo import) steps exactly as torch's does."""
    xla = imported_by_step()["loss"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
    for _ in range(2):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    assert abs(xla - loss.item()) < 1e-4


def test_torch_still_has_the_optimizer_wrapper_shape_the_stand_in_relies_on():
    """If this fails after a torch upgrade, the first optimizer.step() imports torch._dynamo again."""
    assert nodynamo._use_grad_codes() is not None
    out = run("""
        import json, torch, xlanb
        from xlanb.capture import nodynamo
        print(json.dumps(torch.optim.SGD.step.__code__ is nodynamo._use_grad_codes()[1]))
    """)
    assert out is True


def test_the_optimizer_step_keeps_its_grad_mode_switch():
    """torch's wrapper runs the step with grad mode set to `differentiable` and restores it after."""
    seen = []
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    opt = torch.optim.SGD([p], lr=0.5)

    def step(self, closure=None):
        seen.append(torch.is_grad_enabled())
        with torch.no_grad():
            p.sub_(0.5 * p.grad)
        return "done"
    wrapped = nodynamo._make_use_grad(step)
    with torch.enable_grad():
        assert wrapped(opt) == "done"
        assert torch.is_grad_enabled()
    assert seen == [False] and p.tolist() == [0.5, 0.5]


def test_torch_compile_of_the_step_still_works_after_xlanb_kept_dynamo_out():
    """dynamo, imported later, traces the swapped wrapper as it traced torch's (graph breaks included)."""
    out = run("""
        import json, sys, torch, xlanb
        m = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        def step(x):
            opt.zero_grad()
            m(x).sum().backward()
            opt.step()
        compiled = torch.compile(step, backend="eager")
        x = torch.ones(3, 4)
        ref = torch.nn.Linear(4, 2)
        ref.load_state_dict(m.state_dict())
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for _ in range(2):
            compiled(x)
            ref_opt.zero_grad(); ref(x).sum().backward(); ref_opt.step()
        print(json.dumps({"same": torch.allclose(m.weight, ref.weight), "dynamo": "torch._dynamo" in sys.modules}))
    """)
    assert out == {"same": True, "dynamo": True}


def test_other_subclasses_still_get_their_registered_dispatch_rules():
    """capture/nodtensor.py answers torch's dispatch-rule lookup for LazyTensor only."""
    from torch._library import simple_registry

    class Doubling(torch.Tensor):
        @staticmethod
        def __new__(cls, elem):
            return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype)

        def __init__(self, elem):
            self.elem = elem

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            raise AssertionError("the registered rule should have answered")

    assert simple_registry.find_torch_dispatch_rule.__wrapped__ is not None
    lib = torch.library.Library("aten", "FRAGMENT")      # the registration lives as long as lib
    torch.library.register_torch_dispatch(
        "aten::add.Tensor", Doubling, lambda cls, func, types, args, kwargs: args[0].elem * 2 + args[1], lib=lib)
    try:
        out = Doubling(torch.ones(2)) + torch.ones(2)
    finally:
        lib._destroy()
    assert out.tolist() == [3.0, 3.0]
