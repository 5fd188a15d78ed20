"""xlanb.compile(fn, replay=True): replayed calls give exactly what traced calls give; every guard
re-traces with its reason; what cannot be replayed is named, never replayed."""

import math
import os
import re
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import xlanb
from helpers import assert_close, compiles, counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
from test_training_parity import SmallCNN, TinyGPT, gpt_loss  # noqa: E402

STEPS = 6


def events_of(kind: str) -> list:
    return [e for e in xlanb.runtime_state().log.all() if type(e).__name__ == kind]


def reasons(kind: str = "ReplayMiss") -> list[str]:
    return [e.reason for e in events_of(kind)]


def state_of(model, opt=None) -> dict:
    """Every parameter, buffer and optimizer-state tensor, on the CPU."""
    out = {f"p.{k}": v.detach().cpu() for k, v in model.state_dict().items()}
    if opt is not None:
        for i, s in enumerate(opt.state.values()):
            for k, v in s.items():
                out[f"opt.{i}.{k}"] = v.detach().cpu() if isinstance(v, torch.Tensor) else torch.tensor(v)
    return out


def train(make, replay, batches, *, sched=None):
    """Fresh model and optimizer from seed 0; the step through xlanb.compile, replayed (True),
    traced (False), or traced on every call by the replay machinery itself ("retrace": the
    optimizer set up as replay sets it up); returns (losses, state, the compiled step, compiles
    per step)."""
    xlanb.reset()
    torch.manual_seed(0)
    xlanb.manual_seed(0)
    model, opt, loss_fn = make()
    scheduler = sched(opt) if sched else None

    def step(x, y):
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    f = xlanb.compile(step, replay=True, retrace_every=1) if replay == "retrace" else \
        xlanb.compile(step, replay=replay)
    losses, compile_counts = [], []
    for x, y in batches:
        losses.append(f(x.to("xla"), y.to("xla")))
        if scheduler is not None:
            scheduler.step()
        compile_counts.append(compiles())
    return [l.item() for l in losses], state_of(model, opt), f, compile_counts


def assert_same(traced, replayed):
    assert replayed[0] == traced[0], "losses"
    assert traced[1].keys() == replayed[1].keys()
    for k in traced[1]:
        assert torch.equal(traced[1][k], replayed[1][k]), k


def mlp():
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to("xla")
    return model, torch.optim.SGD(model.parameters(), lr=0.1), lambda m, x, y: F.cross_entropy(m(x), y)


def mlp_batches(n=STEPS, batch=16):
    torch.manual_seed(1)
    return [(torch.randn(batch, 20), torch.randint(0, 5, (batch,))) for _ in range(n)]


# --- replay equals tracing -------------------------------------------------------------

def test_mlp_sgd_replays_from_call_3_and_equals_tracing():
    batches = mlp_batches()
    traced = train(mlp, False, batches)
    replayed = train(mlp, True, batches)
    assert_same(traced, replayed)
    f = replayed[2]
    assert (f.traced, f.replayed) == (2, STEPS - 2)
    assert counter("ReplayHit") == STEPS - 2 and counter("ReplayMiss") == 0
    assert replayed[3][-1] == replayed[3][1], f"compiles per step: {replayed[3]}"


def test_gpt_adamw_lambdalr_replays_and_equals_tracing():
    def make():
        model = TinyGPT().to("xla")
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
        return model, opt, gpt_loss
    torch.manual_seed(2)
    batches = [(torch.randint(0, 64, (4, 16)), torch.randint(0, 64, (4, 16))) for _ in range(STEPS)]
    warmup = lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: min(1.0, (s + 1) / 4) / math.sqrt(s + 1))
    traced = train(make, False, batches, sched=warmup)
    replayed = train(make, True, batches, sched=warmup)
    f = replayed[2]
    assert (f.traced, f.replayed) == (3, STEPS - 3)      # AdamW's state is made by call 1
    assert replayed[3][-1] == replayed[3][1], f"compiles per step: {replayed[3]}"
    # replay keeps AdamW's state on the device and makes its learning rate a tensor (a float
    # that LambdaLR changes every step would change every call's graph): the same step traced
    # on every call is bitwise equal; plain xlanb.compile (a CPU step counter) is close
    assert_same(train(make, "retrace", batches, sched=warmup), replayed)
    assert_close(torch.tensor(replayed[0]), torch.tensor(traced[0]), rtol=1e-5, atol=1e-6)
    for k in traced[1]:
        if k.startswith("p."):
            assert_close(replayed[1][k], traced[1][k], rtol=1e-4, atol=1e-6)


def test_cnn_batchnorm_running_statistics_equal_tracing():
    def make():
        model = SmallCNN().to("xla")
        return model, torch.optim.SGD(model.parameters(), lr=0.05), lambda m, x, y: F.cross_entropy(m(x), y)
    torch.manual_seed(3)
    batches = [(torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))) for _ in range(STEPS)]
    traced = train(make, False, batches)
    replayed = train(make, True, batches)
    assert_same(traced, replayed)
    assert replayed[2].replayed == STEPS - 2
    assert replayed[1]["p.bn1.num_batches_tracked"].item() == STEPS
    assert replayed[3][-1] == replayed[3][1], f"compiles per step: {replayed[3]}"


class DropoutNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 5)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.fc(self.drop(x))


def test_dropout_draws_new_masks_on_every_replayed_call():
    def make():
        model = DropoutNet().to("xla")
        return model, torch.optim.SGD(model.parameters(), lr=0.1), lambda m, x, y: F.cross_entropy(m(x), y)
    x, y = torch.randn(16, 20), torch.randint(0, 5, (16,))
    batches = [(x, y)] * STEPS                     # the same batch: only the masks change the loss
    traced = train(make, False, batches)
    replayed = train(make, True, batches)
    assert_same(traced, replayed)
    assert replayed[2].replayed == STEPS - 2
    assert len(set(replayed[0])) == STEPS
    assert replayed[3][-1] == replayed[3][1], f"compiles per step: {replayed[3]}"


def test_gradient_accumulation_over_replayed_calls_without_zero_grad():
    results = []
    for replay in (False, True):
        xlanb.reset()
        torch.manual_seed(0)
        model = nn.Linear(8, 2).to("xla")
        x = torch.randn(4, 8).to("xla")

        def accumulate(x):
            (model(x) ** 2).sum().backward()
        f = xlanb.compile(accumulate, replay=replay)
        for i in range(5):
            f(x)
            if i == 1:
                after_two = compiles()
        assert compiles() == after_two
        results.append((model.weight.grad.cpu(), model.bias.grad.cpu(), getattr(f, "replayed", None)))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    assert results[1][2] == 2            # call 1 creates the grads, calls 2 and 3 accumulate: the plan
    with torch.no_grad():                       # five calls accumulate five equal gradients
        one = (2 * model(x).cpu()).t() @ x.cpu()
    assert_close(results[1][0], 5 * one, rtol=1e-5, atol=1e-5)


def test_a_print_in_the_body_runs_only_when_it_traces(capsys):
    model, opt, loss_fn = mlp()

    @xlanb.compile(replay=True)
    def step(x, y):
        print("tracing step")
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    x, y = torch.randn(16, 20).to("xla"), torch.randint(0, 5, (16,)).to("xla")
    for _ in range(5):
        step(x, y)
    assert capsys.readouterr().out.count("tracing step") == 2
    assert step.replayed == 3


def test_retrace_every_checks_the_body_again():
    model, opt, loss_fn = mlp()
    calls = []

    def step(x, y):
        calls.append(1)
        loss_fn(model, x, y).backward()
        opt.step()
        opt.zero_grad()
    f = xlanb.compile(step, replay=True, retrace_every=3)
    x, y = torch.randn(16, 20).to("xla"), torch.randint(0, 5, (16,)).to("xla")
    for _ in range(8):
        f(x, y)
    assert len(calls) == 4           # calls 1, 2 trace; then every third call: 5 and 8
    assert f.replayed == 4 and not reasons()


# --- guards ------------------------------------------------------------------------------

def guarded_step():
    """An MLP step taking a scale factor; replaying from its third call."""
    torch.manual_seed(0)
    model = nn.Linear(20, 5).to("xla")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y, scale=1.5):
        loss = F.cross_entropy(model(x), y) * scale
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    f = xlanb.compile(step, replay=True)
    x, y = torch.randn(16, 20).to("xla"), torch.randint(0, 5, (16,)).to("xla")
    for _ in range(3):
        f(x, y, 1.5)
    assert f.replayed == 1
    return f, model, opt, x, y


def expected_loss(model, x, y, scale=1.5):
    with torch.no_grad():
        return (F.cross_entropy(model(x).cpu(), y.cpu()) * scale).item()


def test_guard_argument_shape():
    f, model, opt, x, y = guarded_step()
    x2, y2 = torch.randn(8, 20).to("xla"), torch.randint(0, 5, (8,)).to("xla")
    want = expected_loss(model, x2, y2)
    assert f(x2, y2, 1.5).item() == pytest.approx(want, rel=1e-5)
    assert reasons() == ["replay guard failed: argument 0 shape (16, 20) -> (8, 20)"]


def test_an_evicted_executable_is_seen_by_the_replayed_call():
    """A plan's executable is the cache's: each replayed call is a use (it stays in the LRU), and once the
    LRU drops it the call traces again (compiling through the one door), as any graph would."""
    from xlanb._config import override
    f, model, opt, x, y = guarded_step()
    cache = xlanb.runtime_state().cache
    with override(cache_size=len(cache) + 1):
        for n in range(3):                 # another graph between calls: the replayed step stays the newest use
            torch.ones(n + 2, device="xla").add(1).cpu()
            f(x, y, 1.5)
        assert f.replayed == 4 and reasons() == []
        for n in range(len(cache) + 1):    # enough new graphs to push every older one out
            torch.ones(n + 50, device="xla").mul(3).cpu()
        want = expected_loss(model, x, y)
        before = compiles()
        assert f(x, y, 1.5).item() == pytest.approx(want, rel=1e-5)
        assert reasons() == [f"replay guard failed: its executable left the in-memory cache (evicted: cache_size "
                             f"{cache.limit})"]
        assert compiles() > before         # traced again: its graph compiled again through the cache
        want = expected_loss(model, x, y)
        assert f(x, y, 1.5).item() == pytest.approx(want, rel=1e-5)


def test_guard_argument_dtype():
    w = torch.ones(4).to("xla")
    f = xlanb.compile(lambda x: (x * 2 + w).detach(), replay=True)
    x = torch.arange(4.0).to("xla")
    for _ in range(3):
        f(x)
    got = f(x.double())
    assert got.dtype == torch.float64 and got.cpu().tolist() == [1.0, 3.0, 5.0, 7.0]
    assert reasons() == ["replay guard failed: argument 0 dtype float32 -> float64"]


def test_guard_python_scalar_argument():
    f, model, opt, x, y = guarded_step()
    want = expected_loss(model, x, y, scale=3.0)
    assert f(x, y, 3.0).item() == pytest.approx(want, rel=1e-5)
    assert reasons() == ["replay guard failed: argument 2 1.5 -> 3.0 (a Python value is part of the plan)"]


def test_guard_replaced_parameter():
    f, model, opt, x, y = guarded_step()
    with torch.no_grad():
        model.weight = nn.Parameter(torch.zeros(5, 20, device="xla"))
    opt.param_groups[0]["params"][0] = model.weight
    want = expected_loss(model, x, y)
    assert f(x, y, 1.5).item() == pytest.approx(want, rel=1e-5)
    assert reasons() == ["replay guard failed: parameter or buffer 'weight' was replaced"]


def test_guard_a_frozen_parameter():
    f, model, opt, x, y = guarded_step()
    model.bias.requires_grad_(False)
    bias = model.bias.detach().cpu()
    f(x, y, 1.5)
    assert reasons() == ["replay guard failed: 'bias'.requires_grad True -> False (the autograd graph changed)"]
    assert model.bias.grad is None and torch.equal(model.bias.detach().cpu(), bias)


def test_guard_pending_input_is_synced_first():
    f, model, opt, x, y = guarded_step()
    x2 = x * 2                                  # pending when the call starts
    want = expected_loss(model, x2, y)
    assert f(x2, y, 1.5).item() == pytest.approx(want, rel=1e-5)
    assert f.replayed == 2 and not reasons()


def test_guard_grad_mode():
    f, model, opt, x, y = guarded_step()
    with torch.no_grad():
        with pytest.raises(RuntimeError, match="does not require grad"):
            f(x, y, 1.5)
    assert reasons() == ["replay guard failed: grad mode on -> off"]


def test_guard_eager_mode():
    f, model, opt, x, y = guarded_step()
    want = expected_loss(model, x, y)
    with xlanb.eager_mode_context(True):
        assert f(x, y, 1.5).item() == pytest.approx(want, rel=1e-5)
    assert reasons() == ["replay guard failed: eager mode off -> on"]


def test_guard_python_global_the_body_reads():
    global SCALE
    SCALE = 1.0
    model = nn.Linear(4, 1).to("xla")
    x = torch.randn(3, 4).to("xla")

    def scaled(x):
        return (model(x) * SCALE).detach()
    f = xlanb.compile(scaled, replay=True)
    for _ in range(3):
        f(x)
    SCALE = 3.0
    with torch.no_grad():
        want = (model(x) * 3.0).cpu()
    assert_close(f(x).cpu(), want)
    assert reasons() == ["replay guard failed: a Python value the body reads by name changed (SCALE 1.0 -> 3.0)"]


def test_guard_a_global_tensor_rebound():
    global BIAS
    BIAS = torch.ones(4).to("xla")
    x = torch.arange(4.0).to("xla")
    f = xlanb.compile(lambda x: (x + BIAS).detach(), replay=True)
    for _ in range(3):
        f(x)
    BIAS = torch.full((4,), 10.0).to("xla")
    assert f(x).cpu().tolist() == [10.0, 11.0, 12.0, 13.0]
    assert reasons() == ["replay guard failed: a Python value the body reads by name changed "
                         "(BIAS a LazyTensor object -> a LazyTensor object)"]


def test_guard_training_flag():
    model = DropoutNet().to("xla")
    x = torch.randn(4, 20).to("xla")
    f = xlanb.compile(lambda x: model(x).detach(), replay=True)
    for _ in range(3):
        f(x)
    model.eval()
    with torch.no_grad():
        want = model.fc(x).cpu()
    assert_close(f(x).cpu(), want)
    assert reasons() == ["replay guard failed: DropoutNet.training True -> False (model.train()/eval())"]


# --- not replayable ----------------------------------------------------------------------

def not_replayable(body, calls=4):
    f = xlanb.compile(body, replay=True)
    for _ in range(calls):
        f()
    assert f.replayed == 0
    return reasons("NotReplayable")


def test_a_value_read_inside_is_not_replayable():
    w = torch.randn(4).to("xla")

    def body():
        if (w.sum() > 100).item():
            w.mul_(0.5)
        w.add_(1.0)
    (reason,) = not_replayable(body)
    assert reason.startswith("a value read inside the body cuts its graph")


def test_a_graph_cut_inside_is_not_replayable():
    w = torch.randn(8).to("xla")

    def body():
        w.add_(w[w > 0].sum())
    (reason,) = not_replayable(body)
    assert "cuts" in reason


def test_a_cpu_fallback_inside_is_not_replayable(monkeypatch):
    from xlanb.lower import registry
    w = torch.randn(8).to("xla")
    registry.has_rule("aten.sinh.default")                 # the table loaded, then the rule taken out
    monkeypatch.delitem(registry.LOWERINGS, "aten.sinh.default")

    def body():
        w.copy_(torch.sinh(w) * 0.5)
    (reason,) = not_replayable(body)
    # aten.sinh, or prims.sinh when this process first records sinh now (it then decomposes)
    assert re.fullmatch(r"it runs (aten|prims)\.sinh\.default on the CPU \(no lowering\)", reason), reason


def test_a_tensor_made_inside_that_outlives_the_call_is_not_replayable():
    w = torch.randn(8).to("xla")
    kept = []

    def body():
        w.add_(1.0)
        kept.append(w * 2)
    (reason,) = not_replayable(body)
    assert reason.startswith("a tensor f32[8] made inside the body outlives the call, and is neither returned "
                             "nor a .grad nor written in place")
    assert "list" in reason


def test_returning_a_tensor_whose_backward_runs_outside_is_not_replayable():
    model = nn.Linear(4, 1).to("xla")
    x = torch.randn(3, 4).to("xla")
    f = xlanb.compile(lambda: model(x).sum(), replay=True)
    for _ in range(4):
        f().backward()
    assert f.replayed == 0
    (reason,) = reasons("NotReplayable")
    assert reason.startswith("it returns a tensor attached to an autograd graph")


def test_a_number_that_changes_every_call_is_named():
    w = torch.zeros(4).to("xla")
    count = [0]

    def body():
        count[0] += 1
        w.add_(count[0] * 0.5 + 2)
    (reason,) = not_replayable(body)
    assert reason.startswith("two calls did different things: a Python number in the graph changed (2.5 -> 3.0)")


def test_a_scheduler_stepped_inside_is_not_replayable():
    model = nn.Linear(4, 1).to("xla")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100)      # flat for 100 steps
    x = torch.randn(3, 4).to("xla")

    def body():
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    (reason,) = not_replayable(body)
    assert reason.startswith("StepLR.step() runs inside the body")
    assert sched.last_epoch == 4


def test_replay_is_refused_for_a_with_block():
    with pytest.raises(TypeError, match="replays a function"):
        with xlanb.compile(replay=True):
            pass


def test_a_failed_replayed_launch_loses_nothing():
    f, model, opt, x, y = guarded_step()
    weight = model.weight.detach().cpu()
    xlanb.runtime_state().inject_fault("execution", "error")
    with pytest.raises(RuntimeError, match="injected fault in execution") as raised:
        f(x, y, 1.5)
    assert "replaying graph 'step' on the device" in "\n".join(raised.value.__notes__)
    assert torch.equal(model.weight.detach().cpu(), weight)      # nothing was rebound
    want = expected_loss(model, x, y)
    assert f(x, y, 1.5).item() == pytest.approx(want, rel=1e-5)
    assert f.replayed == 2


# --- gradients written into the previous step's .grad buffers -------------------------------

def _grad_first_step(optimizer=torch.optim.SGD, **hyper):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to("xla")
    opt = optimizer(model.parameters(), **(hyper or {"lr": 0.1}))

    def step(x, y):
        opt.zero_grad()                    # set_to_none: each traced call makes fresh .grad tensors
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return model, step


def test_fresh_grads_are_written_into_the_previous_grad_buffers_and_equal_tracing():
    xlanb.reset()
    batches = [(x.to("xla"), y.to("xla")) for x, y in mlp_batches()]
    model, step = _grad_first_step()
    traced = xlanb.compile(step)
    want = [traced(x, y).item() for x, y in batches]
    want_grads = [p.grad.cpu() for p in model.parameters()]
    want_params = [p.detach().cpu() for p in model.parameters()]

    xlanb.reset()
    model, step = _grad_first_step()
    f = xlanb.compile(step, replay=True)
    losses, grads_seen = [], []
    for i, (x, y) in enumerate(batches):
        old = [(p.grad._node or p.grad._storage.node).buffer for p in model.parameters()] if i >= 4 else None
        losses.append(f(x, y).item())
        if old is not None:                # a replayed call donated the old .grad buffers (from the 2nd replay on:
            # the traced call's .grad tensors are views that other objects still hold)
            assert all(b.is_deleted() for b in old)
        grads_seen.append([id(p.grad) for p in model.parameters()])
        if i == 1:
            after_two = compiles()
    assert f.replayed == STEPS - 2 and f.plan.recycling is not None
    assert grads_seen[-1] == grads_seen[-2]   # the same .grad tensors, rebound
    assert losses == want
    for p, g, w in zip(model.parameters(), want_grads, want_params):
        assert torch.equal(p.grad.cpu(), g) and torch.equal(p.detach().cpu(), w)
    assert compiles() == after_two         # the recycling twin is compiled by call 2; nothing after


def test_recycling_with_adamw_compiles_nothing_after_step_2():
    """AdamW makes its state in call 1, so the plan comes from call 3; the recycling executable is
    compiled by call 2 and cached, not compiled again by call 3."""
    xlanb.reset()
    batches = [(x.to("xla"), y.to("xla")) for x, y in mlp_batches()]
    model, step = _grad_first_step(torch.optim.AdamW, lr=1e-2)
    traced = xlanb.compile(step)
    want = [traced(x, y).item() for x, y in batches]

    xlanb.reset()
    model, step = _grad_first_step(torch.optim.AdamW, lr=1e-2)
    f = xlanb.compile(step, replay=True)
    losses = []
    for i, (x, y) in enumerate(batches):
        losses.append(f(x, y).item())
        if i == 1:
            after_two = compiles()
    assert (f.traced, f.replayed) == (3, STEPS - 3) and f.plan.recycling is not None
    assert compiles() == after_two
    assert_close(torch.tensor(losses), torch.tensor(want), rtol=1e-5, atol=1e-6)


def test_a_grad_the_caller_holds_is_not_recycled():
    xlanb.reset()
    batches = [(x.to("xla"), y.to("xla")) for x, y in mlp_batches()]
    model, step = _grad_first_step()
    f = xlanb.compile(step, replay=True)
    for x, y in batches[:4]:
        f(x, y)
    held = next(model.parameters()).grad          # the caller keeps last step's gradient
    value = held.cpu()
    f(*batches[4])
    assert f.replayed == 3
    assert torch.equal(held.cpu(), value)         # still readable, still last step's value
    assert next(model.parameters()).grad is not held
