"""The pure parts of SPMD support, in this one-device process: sharding changes in the explainer,
the collective parser, the tile pictures, and one device staying out of the CacheKey."""

import torch

import xlanb
from xlanb import events
from xlanb.runtime.explain import diff
from xlanb.ir.graph import CacheKey, build_graph
from xlanb.ir.node import intern_meta
from xlanb.ir.sharding import ShardingKey
from xlanb.report.sharding import tile_svg, tile_text
from xlanb.runtime.partition import collectives, replica_groups

ROWS = ShardingKey("{devices=[8,1]<=[8]}", tuple(range(8)), "('data', None) on mesh data=8")
REPLICATED = ShardingKey("{replicated}", tuple(range(8)), "replicated on mesh data=8")


def _key(shardings, inputs=2):
    meta = intern_meta((8, 4), torch.float32)
    return CacheKey(tuple([meta] * inputs), (0,), (), (), (), shardings)


def test_a_changed_input_sharding_is_named_with_both_shardings():
    (change,) = diff(_key((REPLICATED, ROWS)), _key((REPLICATED, REPLICATED)))
    assert change.kind == "sharding"
    assert str(change) == "input 1 sharding: ('data', None) on mesh data=8 -> replicated on mesh data=8"


def test_one_device_is_an_empty_ingredient_and_reads_as_one_device():
    changes = diff(_key(()), _key((ROWS, REPLICATED)))
    assert [str(c) for c in changes] == ["input 0 sharding: one device -> ('data', None) on mesh data=8",
                                         "input 1 sharding: one device -> replicated on mesh data=8"]


def test_many_changed_shardings_name_three_and_count_the_rest():
    changes = diff(_key((), inputs=10), _key((ROWS,) * 10, inputs=10))
    assert [c.kind for c in changes] == ["sharding"] * 3 + ["shardings"]
    assert str(changes[-1]) == "and the sharding of 7 more inputs"


def test_equal_tiles_spelled_differently_are_one_ingredient():
    other = ShardingKey("{devices=[8,1]<=[8]}", tuple(range(8)), "('data',) on mesh data=8")
    assert other == ROWS and hash(other) == hash(ROWS)
    assert ShardingKey("{devices=[8,1]<=[8]}", (1, 0, 2, 3, 4, 5, 6, 7)) != ROWS   # device order counts


def test_single_device_graphs_have_no_shardings_ingredient():
    x = torch.ones(4, 4, device="xla")
    xlanb.sync()
    graph = build_graph([(x + 1)._node], "g")
    assert graph.key.shardings == ()


HLO = """
  %all-reduce = f32[16,24]{1,0} all-reduce(%dot), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  %all-gather-start = (f32[4,8]{1,0}, f32[32,8]{1,0}) all-gather-start(%p), channel_id=2, replica_groups=[1,8]<=[8], dimensions={0}
  %all-gather-done = f32[32,8]{1,0} all-gather-done(%all-gather-start)
  %reduce-scatter = bf16[2,8]{1,0} reduce-scatter(%q), channel_id=3, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, to_apply=%add
  %collective-permute = s32[4]{0} collective-permute(%r), channel_id=4, source_target_pairs={{0,1},{1,0}}
  %add.1 = f32[4]{0} add(%a, %b)
"""


def test_collectives_are_read_from_optimized_hlo_with_sizes_and_groups():
    found = collectives(HLO)
    assert [(c.op, c.type, c.nbytes, c.groups) for c in found] == [
        ("all-reduce", "f32[16,24]", 16 * 24 * 4, "{{0,1,2,3},{4,5,6,7}}"),
        ("all-gather", "f32[32,8]", 32 * 8 * 4, "{{0,1,2,3,4,5,6,7}}"),
        ("reduce-scatter", "bf16[2,8]", 2 * 8 * 2, "{{0,1,2,3,4,5,6,7}}"),
        ("collective-permute", "s32[4]", 16, "{{0,1},{1,0}}"),
    ]


def test_tiles_are_drawn_as_text_and_svg():
    info = events.ShardingInfo(0, "f32[8,4]", "('data', 'model') on mesh data=2 model=2", "{devices=[2,2]<=[4]}",
                               8, 4, (0, 1), (events.Tile(0, 4, 0, 2, (0,)), events.Tile(0, 4, 2, 4, (1,)),
                                              events.Tile(4, 8, 0, 2, (2,)), events.Tile(4, 8, 2, 4, (3,))))
    text = tile_text(info)
    assert text.splitlines()[0] == "f32[8,4] ('data', 'model') on mesh data=2 model=2"
    assert text.splitlines()[2] == "| dev 0 | dev 1 |" and text.splitlines()[4] == "| dev 2 | dev 3 |"
    svg = tile_svg(info)
    assert svg.startswith("<svg") and svg.count("<rect") == 4 and "devices 3: rows 4:8, columns 2:4" in svg


def test_compact_replica_groups_are_written_out():
    assert replica_groups("mesh['axis_0'=1,'axis_1'=4,'axis_2'=2], device_ids=([2,4]T(1,0)) {'axis_1'}") == \
        "{{0,1,2,3},{4,5,6,7}}"
    assert replica_groups("mesh['axis_0'=2,'axis_1'=4] {'axis_0'}") == "{{0,4},{1,5},{2,6},{3,7}}"
    assert replica_groups("[2,4]<=[8]") == "{{0,1,2,3},{4,5,6,7}}"
    assert replica_groups("[4,2]<=[2,4]T(1,0)") == "{{0,4},{1,5},{2,6},{3,7}}"
    assert replica_groups("{{0,1},{2,3}}") == "{{0,1},{2,3}}"            # explicit: as XLA wrote it
