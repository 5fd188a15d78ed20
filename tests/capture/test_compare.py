"""xlanb.compare(): each op of a region against its CPU twin. A custom op whose lowering differs from
its CPU kernel is named (op, line, module, phase), earlier ops are ok and the ops that consume it
inherit; real models (an HF Llama forward and backward, an AdamW step, dropout) compare clean."""

import copy
import inspect

import pytest
import torch

import xlanb
from xlanb import events
from xlanb.capture.compare import CompareError
from xlanb.lower.registry import LOWERINGS, lowers
from helpers import assert_close


# --- custom ops: CPU kernels that are right, lowerings that are not -------------------------------
@torch.library.custom_op("xlanb_cmp::scaled", mutates_args=())
def scaled(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0


@scaled.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("xlanb_cmp::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x ** 3


@cube.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("xlanb_cmp::cube_grad", mutates_args=())
def cube_grad(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return 3 * x * x * g


@cube_grad.register_fake
def _(x, g):
    return torch.empty_like(x)


def _cube_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _cube_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return cube_grad(x, g)


cube.register_autograd(_cube_backward, setup_context=_cube_setup)


@torch.library.custom_op("xlanb_cmp::nudged", mutates_args=())
def nudged(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@nudged.register_fake
def _(x):
    return torch.empty_like(x)

if "xlanb_cmp.scaled.default" not in LOWERINGS:
    @lowers("xlanb_cmp.scaled.default")
    def _scaled_wrong(x):
        return x * 2.01                          # the bug compare must find: 0.5% off

    @lowers("xlanb_cmp.nudged.default")
    def _nudged(x):
        return x + 4e-6                          # off by less than float32's default atol (1e-5)

    @lowers("xlanb_cmp.cube.default")
    def _cube_right(x):
        return x * x * x

    @lowers("xlanb_cmp.cube_grad.default")
    def _cube_grad_wrong(x, g):
        return 2 * x * x * g                     # the backward's bug: 2 instead of 3


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(8, 16)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        h = scaled(h)
        return self.out(h)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)


class Cubic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return cube(self.lin(x)).sum()


def _line_of(fn, text: str) -> str:
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return f"test_compare.py:{start + i}"
    raise AssertionError(text)


@pytest.fixture(params=["lazy", "eager"])
def mode(request):
    with xlanb.eager_mode_context(request.param == "eager"):
        yield request.param


def test_names_the_op_whose_lowering_differs(mode):
    torch.manual_seed(0)
    net = Net().to("xla")
    x = torch.randn(4, 8).to("xla")
    with xlanb.compare() as cmp:
        y = net(x)
        loss = (y * y).sum()
    assert not cmp.ok
    first = cmp.first_divergence
    assert first.op == "xlanb_cmp.scaled.default"
    assert first.location == _line_of(Block.forward, "scaled(h)")
    assert first.module == "block"
    assert first.phase == "forward"
    with torch.no_grad():
        h = torch.tanh(copy.deepcopy(net).to("cpu").block.inp(x.cpu()))     # scaled's input: its error is 0.01 |h|
    assert first.max_abs == pytest.approx(0.01 * float(h.abs().max()), rel=1e-2)
    i = first.index
    assert [r.status for r in cmp.rows[:i]] == ["ok"] * i
    assert [r.op for r in cmp.rows[:i]] == ["aten.addmm.default", "aten.tanh.default"]
    later = cmp.rows[i + 1:]
    assert [r.op for r in later] == ["aten.addmm.default", "aten.mul.Tensor", "aten.sum.default"]
    assert {r.status for r in later} == {"inherited"}
    assert later[0].module == "block.out"
    # the xla side computed what it computes without compare: the wrong lowering's values
    assert_close(loss.cpu(), _reference(net, x, 2.01))


def _reference(net, x, factor):
    cpu = copy.deepcopy(net).to("cpu")
    with torch.no_grad():
        h = torch.tanh(cpu.block.inp(x.cpu())) * factor
        y = cpu.block.out(h)
    return (y * y).sum()


def test_first_divergence_in_backward(mode):
    torch.manual_seed(0)
    model = Cubic().to("xla")
    x = torch.randn(2, 8).to("xla")
    with xlanb.compare() as cmp:
        loss = model(x)
        loss.backward()
    first = cmp.first_divergence
    assert first is not None and first.op == "xlanb_cmp.cube_grad.default"
    assert first.phase == "backward"
    assert first.location == _line_of(Cubic.forward, "cube(self.lin(x))")   # the forward op it differentiates
    assert first.module == ""
    forward = [r for r in cmp.rows if r.phase == "forward"]
    assert forward and all(r.status == "ok" for r in forward)
    assert any(r.status == "inherited" and r.phase == "backward" for r in cmp.rows[first.index + 1:])


def test_an_op_that_scales_a_difference_under_the_tolerance_inherits_it(mode):
    # nudged's lowering is off by 4e-6, within float32's default tolerance (given: a TPU widens the
    # defaults): its row is ok. The product by 1000 makes that 4e-3, past the tolerance, but the product
    # computes what the CPU computes from the values it got: it inherits the difference, and no op
    # introduced one
    x = torch.linspace(-1, 1, 16).to("xla")
    with xlanb.compare(rtol=1.3e-6, atol=1e-5) as cmp:
        y = nudged(x) * 1000.0
    assert [(r.op, r.status) for r in cmp.rows] == [("xlanb_cmp.nudged.default", "ok"),
                                                    ("aten.mul.Tensor", "inherited")], cmp.table()
    assert cmp.first_divergence is None and not cmp.ok
    assert cmp.rows[1].max_abs == pytest.approx(4e-3, rel=2e-2)
    assert_close(y.cpu(), (torch.linspace(-1, 1, 16) + 4e-6) * 1000.0)


def test_an_in_place_op_is_re_run_on_the_value_it_overwrote(mode):
    # the CPU re-run of mul_ needs x as it was before the write: kept from the op on (an eager op
    # could otherwise donate the old buffer to its own output)
    x = torch.linspace(-1, 1, 16).to("xla")
    with xlanb.compare(rtol=1.3e-6, atol=1e-5) as cmp:
        y = nudged(x)
        y.mul_(1000.0)
    assert [(r.op, r.status) for r in cmp.rows] == [("xlanb_cmp.nudged.default", "ok"),
                                                    ("aten.mul_.Tensor", "inherited")], cmp.table()
    assert_close(y.cpu(), (torch.linspace(-1, 1, 16) + 4e-6) * 1000.0)


def test_a_second_wrong_op_after_the_first_is_introduced_too(mode):
    # the first divergence is the first op that computes other values from the inputs it got; a
    # later op that does so as well is introduced too, although its inputs already differed
    x = torch.randn(4, 8).to("xla")
    with xlanb.compare() as cmp:
        y = scaled(scaled(x) + 1.0)
    assert [(r.op, r.status) for r in cmp.rows] == [("xlanb_cmp.scaled.default", "introduced"),
                                                    ("aten.add.Tensor", "inherited"),
                                                    ("xlanb_cmp.scaled.default", "introduced")], cmp.table()
    assert cmp.first_divergence is cmp.rows[0]
    assert_close(y.cpu(), (x.cpu() * 2.01 + 1.0) * 2.01)


def test_clean_region_is_ok_and_emits_one_event(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 2)).to("xla")
    x = torch.randn(5, 8).to("xla")
    mark = xlanb.runtime_state().log.mark()
    with xlanb.compare() as cmp:
        model(x).logsumexp(-1).mean().backward()
    assert cmp.ok and cmp.first_divergence is None, cmp.table()
    phases = {r.phase for r in cmp.rows}
    assert phases == {"forward", "backward"}
    got = [e for e in xlanb.runtime_state().log.since(mark) if isinstance(e, events.Compared)]
    assert len(got) == 1 and got[0].first is None and len(got[0].rows) == len(cmp.rows)
    assert [r.module for r in cmp.rows if r.op == "aten.gelu.default"] == ["1"]


def test_dropout_is_not_compared_and_causes_no_divergence(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Dropout(0.5), torch.nn.Linear(32, 2)).to("xla")
    model.train()
    x = torch.randn(16, 8).to("xla")
    with xlanb.compare() as cmp:
        model(x).square().mean().backward()
    assert cmp.ok, cmp.table()
    assert cmp.skipped >= 1
    # the mask is drawn by a random op (torch 2.9 decomposes dropout to empty_like + bernoulli_: the
    # empty buffer is not compared either); nothing else is left out
    assert any("random" in why for why in cmp.not_compared), cmp.not_compared
    assert all("random" in why or "uninitialized" in why for why in cmp.not_compared), cmp.not_compared
    assert any(r.op == "aten.mul.Tensor" for r in cmp.rows)       # the mask applied: compared, and equal


def test_adamw_step_inside_the_region(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to("xla")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, 8).to("xla")
    for _ in range(2):
        with xlanb.compare() as cmp:
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        assert cmp.ok, cmp.table()
        assert any(r.op.startswith("aten._foreach_") or r.op.startswith("aten.lerp") for r in cmp.rows), \
            [r.op for r in cmp.rows]


def test_tiny_llama_forward_and_backward():
    transformers = pytest.importorskip("transformers", reason="transformers (requirements-dev.txt) is not installed")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to("xla")
    ids = torch.randint(0, 300, (2, 16)).to("xla")
    with xlanb.compare() as cmp:
        model(ids, labels=ids).loss.backward()
    # no op computes other values than the CPU's from its inputs; on a TPU the rounding differences
    # of a correct model can grow past the (widened) tolerance through a product, and those rows are
    # inherited: first_divergence is the answer everywhere, ok only on the CPU (docs/debugging.md)
    assert cmp.first_divergence is None, cmp.table()
    assert cmp.ok or xlanb.runtime_state().jax_device().platform != "cpu", cmp.table()
    backward = [r for r in cmp.rows if r.phase == "backward"]
    assert len(backward) > 50
    assert any(r.module.startswith("model.layers.1") for r in backward)


def test_precision_hint_on_a_matmul():
    from xlanb.capture.compare import _hint
    row = events.CompareRow(index=0, op="aten.mm.default", location="a.py:1", module="", phase="forward",
                            status="introduced", max_abs=1e-3, max_rel=1e-3, shape=(2, 2), dtype="float32")
    assert "set_float32_matmul_precision('highest')" in _hint(row, "medium")
    assert _hint(row, "highest") == ""


# --- bad input: clear errors, nothing left behind -------------------------------------------
def test_compare_inside_compare_is_refused():
    with xlanb.compare():
        with pytest.raises(CompareError, match="inside another xlanb.compare"):
            with xlanb.compare():
                pass


def test_an_error_in_the_region_leaves_no_twin_behind():
    from xlanb.capture.tensor import LazyTensor
    from xlanb.capture.dispatch import dispatch
    x = torch.ones(3).to("xla")
    with pytest.raises(RuntimeError) as on_cpu:
        torch.mm(torch.ones(3), torch.ones(3))
    cmp = xlanb.compare()
    with pytest.raises(RuntimeError) as raised:
        with cmp:
            y = x + 1
            torch.mm(y, y)               # a 1-d mm: torch's own error
    assert str(raised.value) == str(on_cpu.value)
    rt = xlanb.runtime_state()
    assert rt.comparing is None and not rt.kept and not cmp._twins and not cmp.rows
    assert LazyTensor.__torch_dispatch__.__func__ is dispatch
    assert (y * 2).cpu().tolist() == [4.0, 4.0, 4.0]        # the runtime works as before


def test_replayed_function_inside_compare_is_refused():
    lin = torch.nn.Linear(4, 2).to("xla")
    step = xlanb.compile(lambda x: lin(x).sum(), replay=True)
    x = torch.randn(3, 4).to("xla")
    with xlanb.compare():
        with pytest.raises(RuntimeError, match="replay=True.*__wrapped__"):
            step(x)


def test_compare_inside_a_replayed_function_is_refused():
    def body(x):
        with xlanb.compare():
            return x + 1
    step = xlanb.compile(body, replay=True)
    with pytest.raises(CompareError, match="replay=True"):
        step(torch.ones(2).to("xla"))
    assert xlanb.runtime_state().comparing is None


def test_bad_tolerance_is_refused():
    with pytest.raises(ValueError, match="rtol"):
        xlanb.compare(rtol=-1)


def test_tolerances_are_the_users():
    torch.manual_seed(0)
    net = Net().to("xla")
    x = torch.randn(4, 8).to("xla")
    with xlanb.compare(rtol=0.1, atol=0.1) as cmp:
        net(x).sum()
    assert cmp.ok, cmp.table()


def test_torch_compile_inside_compare_is_refused():
    pytest.importorskip("torch._dynamo")
    from xlanb.dynamo.entry import backend      # the callable: found without xlanb installed (its entry point)
    lin = torch.nn.Linear(4, 2).to("xla")
    fn = torch.compile(lambda x: torch.relu(lin(x)).sum(), backend=backend)
    x = torch.randn(3, 4).to("xla")
    with pytest.raises(CompareError, match="torch.compile"):
        with xlanb.compare():
            fn(x)
    assert xlanb.runtime_state().comparing is None
    assert fn(x).cpu() == torch.relu(lin(x)).sum().cpu()


def test_a_platform_that_widens_the_defaults_uses_them_and_says_so(monkeypatch):
    # XLA:TPU's transcendental functions are good to about 1e-5 relative: there float32's defaults are
    # wider (compare._WIDENED). Tried here by widening the CPU's: the 0.5% error of scaled's lowering is
    # within rtol 1e-2, and the report's tolerance names the widening; explicit tolerances are the user's
    from xlanb.capture import compare as module
    from xlanb.report import build_report, render_text
    platform = xlanb.runtime_state().jax_device().platform
    monkeypatch.setitem(module._WIDENED, platform, {torch.float32: (1e-2, 1e-5)})
    x = torch.randn(4, 8).to("xla")
    mark = xlanb.runtime_state().log.mark()
    with xlanb.compare() as cmp:
        scaled(x)
    assert cmp.ok, cmp.table()
    (e,) = [e for e in xlanb.runtime_state().log.since(mark) if isinstance(e, events.Compared)]
    widened = f"float32 rtol 0.01, atol 1e-05 on {platform.upper()}"
    assert e.widened == widened
    assert f"(rtol/atol: torch defaults, {widened})" in render_text(build_report([e]))
    with xlanb.compare(rtol=1.3e-6, atol=1e-5) as cmp:
        scaled(x)
    assert not cmp.ok and cmp.first_divergence.op == "xlanb_cmp.scaled.default"
