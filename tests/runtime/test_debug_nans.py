"""debug_nans: a graph whose float outputs hold a NaN raises FloatingPointError at its sync (at the op in
eager mode), naming the first op that made a NaN although its inputs held none, with the user's line and
module; pending work stays valid; Inf is not a NaN; off by default, and then nothing changes."""

import math
import os
import sys
import traceback

import numpy as np
import pytest
import torch

import xlanb
from xlanb import events
from xlanb._config import Config, config, from_environ, override
from xlanb.capture.realize import pending_roots
from xlanb.capture.tensor import base_node
from xlanb.runtime import executor
from xlanb.runtime.nans import checked_roots
from xlanb.state import runtime_state

from helpers import compiles

THIS_FILE = os.path.basename(__file__)
_rt = runtime_state()


def here() -> int:
    """The caller's line number (the line of the op that follows on the same line)."""
    return sys._getframe(1).f_lineno


def xla(values) -> torch.Tensor:
    return torch.tensor(values, device="xla")


def test_lazy_sync_names_the_op_and_the_users_line():
    with override(debug_nans=True):
        x = xla([4.0, -1.0])
        y = torch.sqrt(x); line = here()     # noqa: E702 - the op's line is the one named
        z = y * 2 + 1
        with pytest.raises(FloatingPointError) as raised:
            xlanb.sync(wait=True)
    text = str(raised.value)
    assert text.startswith(f"NaN produced by aten.sqrt.default at {THIS_FILE}:{line} in graph 'sync'"), text
    assert "although its inputs held none" in text


def test_eager_mode_raises_at_the_op():
    with override(debug_nans=True), xlanb.eager_mode_context(True):
        x = xla([-2.0])
        line = here() + 2
        with pytest.raises(FloatingPointError) as raised:
            x.log()
    assert f"NaN produced by aten.log.default at {THIS_FILE}:{line}" in str(raised.value)
    last = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert (os.path.basename(last.filename), last.lineno) == (THIS_FILE, line)      # ends at the user's line


def test_eager_mode_checks_ops_that_ran_before_without_it():
    with xlanb.eager_mode_context(True):
        x = xla([-2.0])
        torch.sqrt(x)                        # the eager fast path remembers sqrt's executable
        with override(debug_nans=True):
            with pytest.raises(FloatingPointError, match="aten.sqrt.default"):
                torch.sqrt(x)
        assert math.isnan(torch.sqrt(x).item())          # off again: nothing raised


def test_the_module_path_is_named():
    class Head(torch.nn.Module):
        def forward(self, t):
            return torch.log(t) + 1

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(2, 2)
            self.head = Head()

        def forward(self, t):
            return self.head(self.proj(t) - 100)

    model = Model().to("xla")
    with override(debug_nans=True):
        out = model(xla([[1.0, 2.0]]))
        with pytest.raises(FloatingPointError) as raised:
            out.sum().item()
    assert "NaN produced by aten.log.default at" in str(raised.value)
    assert "(module 'head')" in str(raised.value)


def test_a_nan_made_by_an_optimizer_step_names_the_step_line():
    # torch's optimizer step runs through xlanb's stand-in for its `_use_grad` wrapper (capture/nodynamo.py):
    # that copy is library code, so the line named is the user's `opt.step()`, not the stand-in's
    w = torch.nn.Parameter(xla([1.0, 2.0]))
    opt = torch.optim.SGD([w], lr=float("inf"))
    with override(debug_nans=True):
        w.grad = xla([0.0, 1.0])                     # inf * 0: NaN in the first element
        opt.step(); line = here()            # noqa: E702 - the op's line is the one named
        with pytest.raises(FloatingPointError) as raised:
            xlanb.sync(wait=True)
    assert f"at {THIS_FILE}:{line} in graph" in str(raised.value), str(raised.value)


def test_a_nan_that_came_in_through_an_input_is_said_so():
    x = xla([1.0, float("nan")])             # NaN before any graph
    with override(debug_nans=True):
        y = x + 1
        with pytest.raises(FloatingPointError) as raised:
            xlanb.sync(wait=True)
    text = str(raised.value)
    assert "its input 0 (f32[2]) already held NaN before the graph ran" in text, text
    assert "first read by aten.add.Tensor" in text and "NaN produced by" not in text
    assert torch.equal(torch.isnan(y.cpu()), torch.tensor([False, True]))


def test_inf_is_not_a_nan():
    with override(debug_nans=True):
        mask = torch.full((2,), float("-inf"), device="xla")
        scores = torch.zeros(2, 3, device="xla").masked_fill(torch.tensor([[True, False, False]] * 2, device="xla"),
                                                             float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        xlanb.sync()
        assert torch.equal(mask.cpu(), torch.full((2,), float("-inf")))
        assert torch.allclose(probs.cpu(), torch.tensor([[0.0, 0.5, 0.5]] * 2))


def test_both_infinities_in_one_output_are_not_a_nan():
    """The graph's flag sums each output (inf - inf sets it); the outputs are then checked exactly."""
    with override(debug_nans=True):
        x = xla([1.0, -1.0, 2.0])
        both = x / 0.0                                   # [inf, -inf, inf]
        big = torch.full((4096,), 3e38, device="xla") * xla([1.0]).expand(4096)   # partial sums overflow
        half = torch.tensor([60000.0, -60000.0] * 64, dtype=torch.float16, device="xla") * 2   # +-inf in float16
        xlanb.sync()
        assert both.tolist() == [math.inf, -math.inf, math.inf]
        assert torch.equal(big.cpu(), torch.full((4096,), 3e38))
        assert torch.isinf(half.cpu()).all()
        nan = torch.cat([both, xla([0.0]) / 0.0])       # and a real NaN next to them is still found
        with pytest.raises(FloatingPointError, match="aten.div"):
            xlanb.sync(wait=True)
        assert math.isnan(nan.cpu()[3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_matrix_output_summed_by_rows_misses_no_nan(dtype):
    """On the CPU a matrix output's flag is a matrix-vector product with ones (nans._nan_hint): a NaN in
    its first, last or any element sets it; both infinities in one row, or rows that overflow to
    opposite infinities, set it too and the exact check clears them."""
    for row, col in [(0, 0), (31, 127), (17, 64)]:
        base = torch.ones(32, 128, dtype=dtype)
        base[row, col] = -1.0
        with override(debug_nans=True):
            x = base.to("xla")
            xlanb.sync()
            y = torch.sqrt(x)
            with pytest.raises(FloatingPointError, match="aten.sqrt"):
                xlanb.sync(wait=True)
        assert math.isnan(y.cpu()[row, col]) and torch.isnan(y.cpu()).sum() == 1
    big = torch.full((32, 128), torch.finfo(dtype).max / 2, dtype=dtype)
    big[:16] *= -1                                       # row sums: +inf and -inf, their sum NaN
    big[20, :2] = torch.tensor([math.inf, -math.inf])
    with override(debug_nans=True):
        x = big.to("xla")
        xlanb.sync()
        y = x * 2
        xlanb.sync(wait=True)
    assert torch.equal(y.cpu(), big * 2)


def test_integer_outputs_are_not_checked_and_a_clean_graph_runs_once():
    with override(debug_nans=True):
        x = xla([1.0, 2.0])
        y = (x * 3).sum()
        n = torch.arange(4, device="xla") * 2
        xlanb.sync()
        assert y.item() == 9.0 and n.tolist() == [0, 2, 4, 6]
    assert compiles() == 1


class _NotReady:
    """A launch's NaN flag that reports its graph unfinished until `done` (np.asarray still reads it)."""
    done = False
    is_fully_addressable = True

    def __init__(self, flag):
        self.flag = flag

    def is_ready(self) -> bool:
        return _NotReady.done

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.flag)


@pytest.fixture
def unfinished(monkeypatch):
    """Every checked launch's flag reports its graph unfinished until `_NotReady.done` is set."""
    from xlanb.runtime import nans
    check = nans.check
    monkeypatch.setattr(nans, "check", lambda graph, outs, args, *, now: check(
        graph, (*outs[:-1], _NotReady(outs[-1])), args, now=now))
    monkeypatch.setattr(_NotReady, "done", False)


def test_a_sync_does_not_wait_for_the_flag_and_a_later_read_raises(unfinished):
    # reading the flag at the launch would make the host wait for the graph: a training loop's next
    # trace would no longer overlap this step's execution. A sync reads the flags of finished graphs only.
    with override(debug_nans=True):
        x = xla([4.0, -1.0])
        y = torch.sqrt(x); line = here()     # noqa: E702
        xlanb.sync()                         # not finished: nothing raised, the check waits
        assert len(_rt.nan_checks) == 1
        z = y + 1
        xlanb.sync()                         # neither graph finished
        assert len(_rt.nan_checks) == 2
        with pytest.raises(FloatingPointError) as raised:
            z.cpu()                          # a value read reads every flag, oldest first
    assert f"NaN produced by aten.sqrt.default at {THIS_FILE}:{line}" in str(raised.value)
    assert not _rt.nan_checks and _rt.nan_error is None        # the later graph's check is dropped with it
    with override(debug_nans=True):
        w = z * 2
        xlanb.sync()
        assert len(_rt.nan_checks) == 1
        _NotReady.done = True
        with pytest.raises(FloatingPointError, match="its input 0 .* already held NaN"):
            xlanb.sync()                     # a sync that finds the graph finished raises
    assert torch.equal(torch.isnan(w.cpu()), torch.tensor([False, True]))


def test_wait_reads_the_flags_it_waited_for_and_raises(unfinished):
    # xlanb.sync(); xlanb.wait() is xlanb.sync(wait=True): once the host has waited for the graphs,
    # their flags are read there (where they cost least), and the NaN raised, not at a later sync
    with override(debug_nans=True):
        x = xla([4.0, -1.0])
        y = torch.sqrt(x); line = here()     # noqa: E702
        xlanb.sync()
        assert len(_rt.nan_checks) == 1
        with pytest.raises(FloatingPointError) as raised:
            xlanb.wait()
        assert not _rt.nan_checks and _rt.nan_error is None
        z = x * 2                            # later work runs as usual, and a clean graph raises nothing
        xlanb.sync()
        xlanb.wait()
        assert not _rt.nan_checks
    assert f"NaN produced by aten.sqrt.default at {THIS_FILE}:{line}" in str(raised.value)
    assert z.cpu().tolist() == [8.0, -2.0] and torch.isnan(y.cpu()).tolist() == [False, True]


def test_a_checked_root_keeps_its_operands_until_its_flag_is_read(unfinished):
    # the probe that names the op runs the graph again, so the roots of a check not read yet keep
    # their operands (unchecked roots forget them when stored); once read, they forget them too
    from xlanb.capture.tensor import holder_node
    with override(debug_nans=True):
        y = torch.sqrt(xla([4.0, 9.0])) + 1
        xlanb.sync()
        node = holder_node(y)
        assert node.buffer is not None and node.args and len(_rt.nan_checks) == 1
        _NotReady.done = True
        xlanb.sync()                         # reads the finished graph's flag: no NaN
        assert not _rt.nan_checks and node.args == () and node.operands == ()
    assert y.tolist() == [3.0, 4.0]


def test_turning_it_off_reads_the_checks_left(unfinished):
    with override(debug_nans=True):
        y = torch.sqrt(xla([4.0, -1.0])); line = here()     # noqa: E702
        xlanb.sync()
        assert len(_rt.nan_checks) == 1
    assert not _rt.nan_checks                # read when the setting went off, while the graph could still be probed
    z = y * 2                                # an unchecked graph that reads the checked one's root
    with pytest.raises(FloatingPointError) as raised:
        xlanb.sync()
    assert f"NaN produced by aten.sqrt.default at {THIS_FILE}:{line}" in str(raised.value)
    assert torch.isnan(z.cpu()).tolist() == [False, True]


def test_pending_work_stays_valid_after_the_error():
    x = xla([4.0, -1.0])
    with override(debug_nans=True):
        y = torch.sqrt(x)
        z = x * 2
        with pytest.raises(FloatingPointError):
            xlanb.sync(wait=True)
        assert _rt.nan_error is None and not _rt.pending and not _rt.nan_checks
        w = z + 1                            # later work runs as usual
        xlanb.sync()
    expected = torch.sqrt(torch.tensor([4.0, -1.0]))
    assert torch.equal(torch.isnan(y.cpu()), torch.isnan(expected)) and y.cpu()[0] == expected[0]
    assert torch.equal(z.cpu(), torch.tensor([8.0, -2.0])) and torch.equal(w.cpu(), torch.tensor([9.0, -1.0]))


def test_off_by_default_nothing_changes():
    assert Config().debug_nans is False and config().debug_nans is False
    x = xla([-1.0])
    y = torch.sqrt(x)
    xlanb.sync()                             # nothing raised
    assert math.isnan(y.item())
    (compile_event,) = [e for e in _rt.log.all() if isinstance(e, events.Compile)]
    assert compiles() == 1 and len(compile_event.outputs) == 1
    assert not any(key.nan_check for key in _rt.history["sync"])


def test_turning_it_on_compiles_the_checked_graph_and_says_why():
    def step():
        x = xla([-1.0])
        return torch.sqrt(x)

    kept = [step()]
    xlanb.sync()
    with override(debug_nans=True), pytest.raises(FloatingPointError):
        kept.append(step())
        xlanb.sync(wait=True)
    (recompile,) = [e.recompile for e in _rt.log.all() if isinstance(e, events.Compile) and e.recompile]
    assert "debug_nans: off -> on" in [str(c) for c in recompile.changes]
    assert not _rt.track_locations and _rt.module_scope is None        # off again: nothing recorded


def test_a_replayed_step_is_traced_and_checked_while_it_is_on():
    w = xla([1.0, 2.0])

    def body(x):
        return torch.log(x * w)

    step = xlanb.compile(body, replay=True)
    for _ in range(3):
        step(xla([1.0, 1.0]))
    assert step.replayed == 1
    with override(debug_nans=True):
        with pytest.raises(FloatingPointError, match="aten.log.default"):
            step(xla([-1.0, 1.0]))
            xlanb.wait()        # the flag is read once the graph has finished: at once on a CPU only
    misses = [e.reason for e in _rt.log.all() if isinstance(e, events.ReplayMiss)]
    assert misses[-1] == "replay guard failed: debug_nans is on: each call runs its body, so that its graph is " \
                         "checked for NaN"
    assert step.replayed == 1


def test_the_setting_comes_from_the_environment():
    assert from_environ({"XLANB_DEBUG_NANS": "1"}).debug_nans is True
    assert from_environ({"XLANB_DEBUG_NANS": "0"}).debug_nans is False
    assert from_environ({}).debug_nans is False


def test_the_notebook_magic_parses_it():
    import dataclasses

    from xlanb.notebook.runtime_magics import _parse
    (field,) = [f for f in dataclasses.fields(Config) if f.name == "debug_nans"]
    assert _parse(field, "1") is True and _parse(field, "off") is False


def test_the_environment_variable_turns_it_on_at_import(tmp_path):
    import subprocess
    script = tmp_path / "user.py"
    script.write_text("import torch, xlanb\nx = torch.tensor([-1.0], device='xla')\ny = x.sqrt()\nxlanb.sync(wait=True)\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("XLANB_")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={**environ, "XLANB_DEBUG_NANS": "1"}, timeout=300)
    assert done.returncode == 1
    assert "FloatingPointError" in done.stderr or "NanError" in done.stderr
    assert "NaN produced by aten.sqrt.default at user.py:3 in graph 'sync'" in done.stderr


def _checked_roots_of(*tensors):
    from xlanb.capture.tensor import base_node
    from xlanb.ir.graph import build_graph
    from xlanb.runtime.nans import checked_roots
    return checked_roots(build_graph([base_node(t) for t in tensors], "g"))


def test_a_root_another_checked_root_is_computed_from_is_not_reduced_again():
    """The flag reads a gradient only through the parameter its update writes (add of a view of it):
    a NaN there is a NaN in the parameter. A root reached through an op that can drop a NaN (where,
    a reduction to max) is reduced itself."""
    p, x = xla([[1.0, 2.0], [3.0, 4.0]]), xla([[0.5, -1.0], [2.0, 1.0]])
    xlanb.sync()
    g = x * 3
    new_p = p.add(g.t().reshape(2, 2), alpha=-0.1)
    masked = torch.where(g > 0, g, 0.0)
    assert _checked_roots_of(g, new_p) == [1]
    assert _checked_roots_of(g, masked) == [0, 1]                   # where drops the NaNs it does not select
    y = x * 2
    assert _checked_roots_of(y, y.amax()) == [0, 1]                 # a max need not carry every NaN
    h = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float16, device="xla") * 2
    assert _checked_roots_of(h, p[0].add(h.view(torch.float32))) == [0, 1]   # a float16 NaN seen as float32 is a number
    xlanb.sync()


def test_a_multi_tensor_update_checks_its_gradients_through_the_parameters():
    """Optimizers update parameters with `_foreach_*` ops: output i of one carries every NaN of element
    i of its list arguments (and every NaN of a one-element tensor argument), so the gradients are read
    through the parameters. An output of a foreach op that can drop a NaN (maximum) does not stand for
    its inputs, nor does one output for a per-element argument."""
    p1, p2, x = xla([1.0, 2.0]), xla([[3.0], [4.0]]), xla([0.5, -1.0])
    xlanb.sync()
    g1, g2 = x * 3, (x * 2).view(2, 1)
    assert _checked_roots_of(g1, g2, *torch._foreach_add([p1, p2], [g1, g2], alpha=-0.1)) == [2, 3]
    assert _checked_roots_of(g1, *torch._foreach_addcdiv([p1], [g1], [x + 1], [0.5])) == [1]
    assert _checked_roots_of(g1, g2, *torch._foreach_mul([g1, g2], [2.0, 3.0])) == [2, 3]   # a scalar list
    assert _checked_roots_of(g1, g2, *torch._foreach_maximum([p1, p2], [g1, g2])) == [0, 1, 2, 3]
    lr = x.sum()                              # a one-element tensor meets every output element
    assert _checked_roots_of(lr, *torch._foreach_mul([p1, p1], lr)) == [1, 2]
    per_element = x * 1                       # addcdiv's scalars: element j reaches output j only
    assert _checked_roots_of(per_element, *torch._foreach_addcdiv([p1, p1], [g1, g1], [x, x], per_element)) == [0, 1, 2]
    xlanb.sync()


def test_an_optimizer_step_reduces_the_parameters_only():
    """torch's SGD and AdamW step with foreach ops: a step's graph reduces its parameters (the weight and
    bias), not the gradients nor AdamW's moments, which feed them."""
    torch.manual_seed(0)
    for make in (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True),
                 lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=True)):
        model = torch.nn.Linear(4, 3).to("xla")
        opt = make(model.parameters())
        for _ in range(2):                        # the second step: the moments exist before it
            xlanb.sync()
            model(torch.ones(2, 4, device="xla")).sum().backward()
            opt.step()
        params = {base_node(model.weight), base_node(model.bias)}
        graph = executor.new_graph(pending_roots(), "step")
        assert {graph.roots[i] for i in checked_roots(graph)} == params, (make, len(graph.roots))
        xlanb.sync()


def test_a_nan_in_a_gradient_a_foreach_update_reads_is_named():
    with override(debug_nans=True):
        p, x = xla([1.0, 2.0]), xla([4.0, -1.0])
        xlanb.sync()
        g = torch.sqrt(x); line = here()     # noqa: E702 - the op's line is the one named
        torch._foreach_add_([p], [g], alpha=-0.1)
        with pytest.raises(FloatingPointError) as raised:
            xlanb.sync(wait=True)
    assert str(raised.value).startswith(f"NaN produced by aten.sqrt.default at {THIS_FILE}:{line}"), raised.value
    assert math.isnan(p.cpu()[1])


def test_a_nan_in_an_unreduced_root_still_raises_and_names_its_op():
    """A gradient whose NaN reaches the parameter through the update is not reduced on its own, and
    its op is still the one named."""
    with override(debug_nans=True):
        p, x = xla([1.0, 2.0]), xla([4.0, -1.0])
        xlanb.sync()
        g = torch.sqrt(x); line = here()     # noqa: E702 - the op's line is the one named
        p.sub_(g, alpha=0.1)
        with pytest.raises(FloatingPointError) as raised:
            xlanb.sync(wait=True)
    assert str(raised.value).startswith(f"NaN produced by aten.sqrt.default at {THIS_FILE}:{line}"), raised.value
    assert math.isnan(g.cpu()[1]) and math.isnan(p.cpu()[1])



def test_a_nan_read_through_a_view_of_another_dtype_is_still_found():
    """A float16 NaN whose bits a float32 view reads is a number there: the float16 output is
    checked on its own (a set flag is not implied by the float32 one)."""
    with override(debug_nans=True):
        x = torch.tensor([-1.0, 4.0, 9.0, 16.0], dtype=torch.float16, device="xla")
        p = xla([0.0, 0.0])
        xlanb.sync()
        g = torch.sqrt(x); line = here()     # noqa: E702 - the op's line is the one named
        p.add_(g.view(torch.float32))
        with pytest.raises(FloatingPointError) as raised:
            xlanb.sync(wait=True)
    assert str(raised.value).startswith(f"NaN produced by aten.sqrt.default at {THIS_FILE}:{line}"), raised.value
