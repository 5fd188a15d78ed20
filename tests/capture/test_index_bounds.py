"""Index values out of range raise CPU's error (type and message), never a clamped value: at the op
when the index is host-readable, at the next value read when the graph computes it."""

import pytest
import torch
import torch.nn.functional as F

import xlanb
from helpers import assert_close, same_values

OPS = {
    "index": lambda x, i: x[i],
    "index_2d": lambda x, i: x.view(1, 5)[:, i],
    "index_put": lambda x, i: x.index_put((i,), torch.tensor(1.0, device=x.device)),
    "setitem": lambda x, i: x.clone().__setitem__(i, 2.0),
    "index_select": lambda x, i: x.index_select(0, i),
    "index_select_2d": lambda x, i: x.view(1, 5).index_select(-1, i),
    "gather": lambda x, i: x.gather(0, i),
    "scatter": lambda x, i: x.scatter(0, i, 1.0),
    "scatter_add_": lambda x, i: x.clone().scatter_add_(0, i, torch.ones(2, device=x.device)),
    "take": lambda x, i: x.take(i),
    "embedding": lambda x, i: F.embedding(i, x.view(5, 1)),
    "index_add": lambda x, i: x.index_add(0, i, torch.ones(2, device=x.device)),
    "index_copy": lambda x, i: x.index_copy(0, i, torch.ones(2, device=x.device)),
    "index_fill": lambda x, i: x.index_fill(0, i, 1.0),
    "index_reduce": lambda x, i: x.index_reduce(0, i, torch.ones(2, device=x.device), "amax"),
    "embedding_bag": lambda x, i: F.embedding_bag(i, x.view(5, 1), torch.tensor([0], device=x.device), mode="max"),
    "nll_loss": lambda x, i: F.nll_loss(x.view(1, 5).expand(2, 5), i),
    "cross_entropy": lambda x, i: F.cross_entropy(x.view(1, 5).expand(2, 5), i, reduction="none"),
    "nll_loss2d": lambda x, i: F.nll_loss(x.view(1, 5, 1, 1).expand(1, 5, 2, 1), i.view(1, 2, 1)),
    "multi_margin_loss": lambda x, i: F.multi_margin_loss(x.view(1, 5).expand(2, 5), i),
}


class _Values:
    """A result that equals another where their values are the same (helpers.same_values: within the
    platform's arithmetic where it is not the CPU's, as cross_entropy's log on a TPU)."""

    def __init__(self, t):
        self.t = t

    def __eq__(self, other):
        return isinstance(other, _Values) and self.t.shape == other.t.shape and same_values(self.t, other.t)

    def __repr__(self):
        return repr(self.t.tolist())


def _outcome(op, device, index, pending):
    x = torch.arange(5.0, device=device)
    i = torch.tensor(index, device=device)
    if pending:
        i = i + 0                       # computed in the pending graph: its values are not on the host
    try:
        r = OPS[op](x, i)
        r = x if r is None else r
        return "ok", _Values(r.cpu())
    except (IndexError, RuntimeError) as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("index", [[1, 7], [1, -7], [4, 0]])
def test_out_of_range_index_raises_cpu_error(op, index):
    cpu = _outcome(op, "cpu", index, False)
    assert _outcome(op, "xla", index, False) == cpu           # uploaded index: at the op
    assert _outcome(op, "xla", index, True) == cpu            # pending index: at the value read


def test_a_pending_index_raises_at_the_read_once_and_loses_nothing():
    a = torch.zeros(5, device="xla")
    keep = torch.ones(3, device="xla") * 2                    # pending work that must survive
    ind = torch.ones(20, dtype=torch.int64, device="xla")
    ind[-1] = 10
    r = a[ind]
    with pytest.raises(IndexError) as info:
        r.sum().item()
    assert str(info.value) == "index 10 is out of bounds for dimension 0 with size 5"
    note = info.value.__notes__[0]
    assert note.startswith(f"xlanb: raised by the op at {__file__}:")
    assert "the tensors that op computed hold clamped values" in note
    assert r.sum().item() == 0.0                              # raised once; the tensors stay readable
    assert keep.cpu().tolist() == [2.0, 2.0, 2.0] and a.cpu().tolist() == [0.0] * 5
    assert xlanb.runtime_state().device_checks == []


def test_a_check_run_by_a_sync_is_raised_there_or_at_the_next_read():
    x = torch.arange(5.0, device="xla")
    i = torch.tensor([0, 9], device="xla") * 1
    y = x.gather(0, i)
    with pytest.raises(RuntimeError, match="index 9 is out of bounds for dimension 0 with size 5"):
        xlanb.sync()                                          # raises if the check is done by its end
        torch.ones(1, device="xla").sum().item()              # else the next read does
    assert y.cpu().tolist() == [0.0, 4.0]                     # clamped, as the note says


def test_eager_mode_raises_at_the_op():
    x = torch.arange(5.0, device="xla")
    with xlanb.eager_mode_context(True):
        i = torch.tensor([0, 9], device="xla") * 1
        with pytest.raises(IndexError, match="index out of range in self"):
            x.index_select(0, i)


def test_in_range_pending_indices_compute_cpu_values():
    x = torch.arange(10.0).view(2, 5)
    i = torch.tensor([[4, 0, 2]])
    want = (x.gather(1, i.expand(2, 3)), x[:, i[0]], F.embedding(i, x.t()))
    xx, ii = x.to("xla"), i.to("xla") + 0
    got = (xx.gather(1, ii.expand(2, 3)), xx[:, ii[0]], F.embedding(ii, xx.t()))
    for w, g in zip(want, got):
        assert torch.equal(g.cpu(), w)
    assert xlanb.runtime_state().device_checks == []


def test_a_replayed_step_with_a_computed_index_still_replays():
    table = torch.randn(6, 4).to("xla")

    @xlanb.compile(replay=True)
    def step(logits):
        return table[logits.argmax(-1)].sum()                 # the index is computed inside the body

    logits = torch.randn(3, 6).to("xla")
    outs = [step(logits) for _ in range(4)]
    assert step.replayed == 2
    want = table.cpu()[logits.cpu().argmax(-1)].sum()
    assert all(torch.allclose(o.cpu(), want) for o in outs)


def test_a_full_graph_compile_keeps_its_check_in_the_graph():
    x = torch.arange(5.0, device="xla")
    i = torch.tensor([1, 5], device="xla")
    with pytest.raises(IndexError, match="index out of range in self"):
        with xlanb.compile(name="bounded", full_graph=True):
            y = x.index_select(0, i + 0) * 2                  # the index is computed inside the graph
        y.cpu()                                               # (or at the block's sync, once the check ran)
    assert not xlanb.is_eager_mode() and xlanb.runtime_state().compile_scope is None
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_loop_that_never_reads_keeps_no_growing_list_of_checks():
    x = torch.arange(5.0, device="xla")
    for _ in range(20):
        i = torch.tensor([0, 3], device="xla") + 1
        x = x.index_select(0, torch.cat([i, i, i.flip(0)[:1]])).sum().expand(5) * 0 + x
        xlanb.sync()
        xlanb.wait()
    assert len(xlanb.runtime_state().device_checks) <= 1          # examined at each sync once ready


def test_a_done_check_behind_a_pending_one_is_examined_without_comparing_tensors():
    """torch.compile's W4 step left a check whose graph had not run ahead of one whose had: taking
    the done one off the list compared the two checks' tensors ("Boolean value of Tensor ... is
    ambiguous"). Checks are equal only to themselves."""
    from xlanb.capture import bounds
    rt = xlanb.runtime_state()
    pending = bounds.DeviceCheck(torch.zeros(3, dtype=torch.int64, device="xla") + 1, None, None)
    rt.device_checks[:] = [pending] + [bounds.DeviceCheck(torch.tensor([0, 0, 0], device="xla"), None, None)]
    try:
        bounds.raise_failed()
        assert [id(c) for c in rt.device_checks] == [id(pending)]
    finally:
        rt.device_checks.clear()


@pytest.mark.parametrize("ignore", [-100, 7])
def test_a_class_target_equal_to_ignore_index_is_no_error(ignore):
    x = torch.randn(3, 5)
    target = torch.tensor([1, ignore, 4])
    want = F.cross_entropy(x, target, ignore_index=ignore)
    got = F.cross_entropy(x.to("xla"), (target.to("xla") + 0), ignore_index=ignore)     # pending: in the graph
    assert_close(got.cpu(), want)
    assert_close(F.nll_loss(x.to("xla"), target.to("xla"), ignore_index=ignore).cpu(),
                               F.nll_loss(x, target, ignore_index=ignore))


def test_a_pending_check_names_the_first_bad_values_position():
    """The graph's check returns the position of the first value out of range, so CPU's message,
    which names it, is CPU's for the real index."""
    i = torch.tensor([0, 1, 9], device="xla") * 1
    with pytest.raises(RuntimeError) as xla:
        F.embedding_bag(i, torch.zeros(3, 2, device="xla"), torch.tensor([0], device="xla")).cpu()
    with pytest.raises(RuntimeError) as cpu:
        F.embedding_bag(torch.tensor([0, 1, 9]), torch.zeros(3, 2), torch.tensor([0]))
    assert str(xla.value) == str(cpu.value)
