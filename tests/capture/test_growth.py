"""A tensor grown by cat, read at its end, and a value read in a loop: fixed graphs, exact values."""

import torch

import xlanb
from helpers import compiles, counter
from xlanb.capture.tensor import value


def test_appending_records_one_flat_cat_of_every_piece():
    x = torch.arange(4).reshape(1, 4).to("xla")
    for i in range(5):
        x = torch.cat([x, torch.full((1, 1), i, device="xla")], -1)
    node = value(x)
    assert node.name == "aten.cat.default" and len(node.args[0]) == 6
    expected = torch.cat([torch.arange(4).reshape(1, 4)] + [torch.full((1, 1), i) for i in range(5)], -1)
    assert torch.equal(x.cpu(), expected)


def test_reading_a_tensor_grown_from_device_data_compiles_nothing():
    pieces = [torch.arange(4).reshape(1, 4)] + [torch.tensor([[10 + i]]) for i in range(6)]
    grown = pieces[0].to("xla")
    for p in pieces[1:]:
        grown = torch.cat([grown, p.to("xla")], -1)
    before = compiles()
    assert torch.equal(grown.cpu(), torch.cat(pieces, -1))
    assert torch.equal(grown[:, 2:6].cpu(), torch.cat(pieces, -1)[:, 2:6])
    assert compiles() == before
    assert value(grown).buffer is not None          # kept as device data: later graphs take it as an input


def test_the_newest_end_of_a_grown_tensor_reads_only_the_newest_piece():
    ids = torch.arange(8).reshape(1, 8).to("xla")
    xlanb.sync()
    reads = []
    for step in range(6):
        new = torch.full((1, 1), 100 + step, device="xla") * 2
        ids = torch.cat([ids, new], -1)
        last, last_col = ids[:, -1], ids[:, -1:].view(1, 1, 1)
        reads.append((int((last + last_col.sum()).item()), ids.shape[1]))
    assert reads == [(4 * (100 + s), 9 + s) for s in range(6)]
    assert compiles() == 1                       # one graph for every step: the prefix is never an input
    assert torch.equal(ids.cpu(), torch.cat([torch.arange(8).reshape(1, 8),
                                             2 * torch.arange(100, 106).reshape(1, 6)], -1))


def test_a_slice_across_pieces_reads_the_whole_cat():
    a, b = torch.arange(6.).reshape(2, 3), torch.arange(6., 10.).reshape(2, 2)
    c = torch.cat([a.to("xla") * 1.5, b.to("xla")], 1)
    expected = torch.cat([a * 1.5, b], 1)
    for index in ((slice(None), slice(2, 4)), (slice(None), slice(-2, None)), (slice(None), 1), (0,),
                  (slice(None), slice(0, 5, 2))):
        assert torch.equal(c[index].cpu(), expected[index]), index


def test_a_write_through_the_end_of_a_grown_tensor_reaches_it():
    ids = torch.cat([torch.zeros(1, 3, device="xla"), torch.ones(1, 1, device="xla") * 2], -1)
    ids[:, -1:] += 5
    end = ids[:, -1]
    assert end.item() == 7.0
    assert ids.cpu().tolist() == [[0.0, 0.0, 0.0, 7.0]]


def test_a_value_read_outputs_what_later_pending_work_consumes():
    # `used` is dropped before the read, but the new `pos` (pending, outside the read's graph)
    # consumes it: the read outputs it, so the next step starts from device data instead of
    # computing the whole chain back to the start again
    pos = torch.zeros(1, device="xla")
    xlanb.sync()
    start = compiles()
    sizes, expected = [], 0.0
    for step in range(6):
        used = pos * 2
        flag = used.sum() >= 0
        pos = used + 1
        del used
        assert bool(flag)
        sizes.append(compiles() - start)
        expected = expected * 2 + 1
    assert sizes == [1, 2, 2, 2, 2, 2]               # the first step reads device data; then one graph
    assert counter("ValueReadExtraOutputs") == 6
    assert pos.item() == expected


def test_a_bool_fill_value_is_a_graph_input():
    x = torch.ones(3, device="xla", dtype=torch.long)
    xlanb.sync()
    start = compiles()
    seen = []
    for done in (False, False, True, False):
        flags = torch.full((3,), False, device="xla", dtype=torch.bool) | torch.full((3,), done, device="xla",
                                                                                    dtype=torch.bool)
        seen.append(int((x & ~flags).max().item()))
    assert seen == [1, 1, 0, 1]
    assert compiles() - start == 1


def test_a_float_fill_value_is_a_graph_input():
    for v in (2.5, 3.5):
        assert torch.full((2,), v, device="xla").sum().item() == 2 * v
    assert compiles() == 1


def test_a_read_derivable_from_shapes_cuts_no_graph_even_in_full_graph():
    x = torch.randn(4, 4).to("xla")
    with xlanb.compile(name="strict", full_graph=True):
        mask = torch.ones(1, 4, dtype=torch.long, device="xla")
        keep = bool(mask.sum() == mask.numel())          # HF's fast_all on a mask made from shapes
        y = (x @ x).relu() if keep else x
    assert torch.allclose(y.cpu(), (x.cpu() @ x.cpu()).relu())


def test_a_read_of_device_data_runs_nothing_and_passes_full_graph():
    x = torch.tensor([3.0]).to("xla")
    before = compiles()
    with xlanb.compile(name="strict", full_graph=True):
        assert x.item() == 3.0
        y = x * 2
    assert compiles() == before + 1 and y.item() == 6.0


def test_a_read_of_computed_work_still_violates_full_graph():
    x = torch.randn(4).to("xla")
    try:
        with xlanb.compile(name="strict", full_graph=True):
            (x * 2).sum().item()
    except RuntimeError as e:
        assert str(e).startswith("Unexpected execution happens inside the compiled function")
    else:
        raise AssertionError("no violation")


def test_growth_hint_names_the_dimension_that_grows_each_call():
    cache = torch.zeros(1, 2, 4).to("xla")
    xlanb.sync()
    for step in range(4):
        cache = torch.cat([cache, torch.ones(1, 1, 4, device="xla")], 1)
        (cache * 2).sum().item()
    text = xlanb.debug.explain_recompiles()
    assert "a dimension grows by 1 each call: input 0 dim 1, f32[1,4,4] -> f32[1,5,4]" in text
    assert 'cache_implementation="static"' in text


def test_growth_hint_holds_when_another_graph_recompiles_between_the_calls():
    # two graphs each step, both named "sync" (a mask check, then the model step, as some HF releases
    # run): the hint compares a graph with the earlier ones of its own structure, not with the last two
    cache = torch.zeros(1, 2, 4).to("xla")
    other = torch.ones(3).to("xla")
    xlanb.sync()
    for step in range(4):
        cache = torch.cat([cache, torch.ones(1, 1, 4, device="xla")], 1)
        (cache * 2).sum().item()
        y = other
        for _ in range(step + 1):         # one op more each step: a recompile with other inputs
            y = y + 1
        y.sum().item()
    text = xlanb.debug.explain_recompiles()
    assert "a dimension grows by 1 each call: input 0 dim 1, f32[1,4,4] -> f32[1,5,4]" in text, text
