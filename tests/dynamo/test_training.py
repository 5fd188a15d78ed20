"""Whole training steps through torch.compile(backend="xlanb"): forward, backward, AdamW and
zero_grad become one lazy graph, so each step runs one executable; an LR schedule and Adam's
step count never capture or compile again after step 2; a graph break changes no result."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

import xlanb
from models.test_training_parity import TinyGPT, assert_params_close, gpt_loss
from nets import compiles, executions, of_type
from xlanb import events, hooks
from helpers import assert_close

STEPS = 5


def train_step(model, opt, idx, target):
    loss = gpt_loss(model, idx, target)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def train_step_with_break(model, opt, idx, target):
    logits = model(idx)
    torch._dynamo.graph_break()                       # the step is split here: two forward graphs
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def make_opt(params, foreach):
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1, foreach=foreach)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / math.sqrt(s + 1))


def run(step_fn, foreach=False):
    """STEPS steps on CPU (eager) and on xla (compiled); per xla step, the events it logged."""
    torch.manual_seed(0)
    cpu = TinyGPT()
    dev = copy.deepcopy(cpu).to("xla")
    opt_c, sched_c = make_opt(cpu.parameters(), foreach)
    opt_d, sched_d = make_opt(dev.parameters(), foreach)
    compiled = torch.compile(step_fn, backend="xlanb")
    batches = [(torch.randint(0, 64, (4, 16)), torch.randint(0, 64, (4, 16))) for _ in range(STEPS)]
    losses_c, losses_d, logs = [], [], []
    for idx, target in batches:
        losses_c.append(step_fn(cpu, opt_c, idx, target).item())
        sched_c.step()
        xi, xt = idx.to("xla"), target.to("xla")
        xlanb.sync()                                  # the uploads are not part of the step
        mark = hooks.mark()
        loss = compiled(dev, opt_d, xi, xt)
        sched_d.step()
        xlanb.sync()
        logs.append(hooks.since(mark))
        losses_d.append(loss.item())
    assert_close(torch.tensor(losses_d), torch.tensor(losses_c), rtol=1e-3, atol=1e-5)
    assert_params_close(dev, cpu)
    return dev, opt_d, logs


@pytest.mark.parametrize("foreach", [False, True])
def test_transformer_adamw_lambdalr_parity_one_executable_per_step(foreach):
    dev, opt, logs = run(train_step, foreach)
    assert [executions(log) for log in logs] == [1] * STEPS          # forward + backward + AdamW: one graph
    per_step = [compiles(log) for log in logs]
    assert per_step[2:] == [0] * (STEPS - 2), per_step                # nothing compiles after step 2
    captured = [[(e.kind, e.path) for e in of_type(log, events.DynamoGraph)] for log in logs]
    assert captured[0] == [("forward", "macro"), ("backward", "macro"), ("inference", "macro")], captured
    assert all(c == [] for c in captured[1:]), captured               # dynamo never captured again
    assert all(of_type(log, events.DynamoBreak) == [] or all(b.kind == "graph_break" for b in
               of_type(log, events.DynamoBreak)) for log in logs)
    group = opt.param_groups[0]
    assert group["capturable"] is True and isinstance(group["lr"], torch.Tensor) and group["lr"].device.type == "xla"
    assert all(type(opt.state[p]["step"]).__name__ == "LazyTensor" for p in dev.parameters())
    donated = [e.donated for log in logs[2:] for e in of_type(log, events.Execute)]
    assert all(d > 0 for d in donated), donated                       # parameters and state updated in place


def test_graph_break_in_the_step_gives_right_results_and_still_one_executable():
    dev, opt, logs = run(train_step_with_break)
    assert [executions(log) for log in logs] == [1] * STEPS
    kinds = [e.kind for e in of_type(logs[0], events.DynamoGraph)]
    assert kinds.count("forward") == 2 and kinds.count("backward") == 2, kinds
    breaks = [e for e in of_type(logs[0], events.DynamoBreak) if e.kind == "graph_break"]
    assert breaks and breaks[0].location == f"test_training.py:{train_step_with_break.__code__.co_firstlineno + 2}"
    assert "graph_break" in breaks[0].reason
    assert [compiles(log) for log in logs][2:] == [0] * (STEPS - 2)
