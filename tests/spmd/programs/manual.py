"""Manual sharding: a region of ops that runs on each device's shard alone (enable_manual_sharding /
disable_manual_sharding, torch_xla's), in lazy and eager mode: values as CPU computes them shard by
shard, a sync that leaves the region pending, replicated values read inside it, and clear errors."""

import torch

import xlanb
import xlanb.spmd as xs
from common import compiles, report
from xlanb.capture.tensor import base_node

mesh = xs.Mesh(range(8), (2, 4), ("data", "model"))
out = {}
x_cpu = torch.arange(64.0).reshape(8, 8)


def blocks(t, rows, cols):
    """CPU: `t` cut into the tiles of a rows x cols grid, as a (rows, cols, h, w) tensor."""
    h, w = t.shape[0] // rows, t.shape[1] // cols
    return t.reshape(rows, h, cols, w).permute(0, 2, 1, 3)


for mode in ("lazy", "eager"):
    with xlanb.eager_mode_context(mode == "eager"):
        x = x_cpu.to("xla")
        xx = xs.enable_manual_sharding(x, mesh, ("data", "model"))     # 8x8 over 2x4: shards of 4x2
        r = {"shard_shape": list(xx.shape), "x_spec": xs.sharding_spec(x)}
        xx = xx * 2 + 1
        before = compiles()
        y = xs.disable_manual_sharding(xx, mesh, ("data", "model"), x.shape)
        r["value"] = bool(torch.equal(y.cpu(), x_cpu * 2 + 1))
        r["y_spec"] = xs.sharding_spec(y)
        # each device sums its own 4x2 shard's rows: per-tile sums, tiled back as a 2x4 grid of 4x1 columns
        s = xs.enable_manual_sharding(x_cpu.to("xla"), mesh, ("data", "model")).sum(1, keepdim=True)
        sums = xs.disable_manual_sharding(s, mesh, ("data", "model"), (8, 4)).cpu()
        r["tile_sums"] = bool(torch.equal(sums, blocks(x_cpu, 2, 4).sum(-1, keepdim=True).permute(0, 2, 1, 3).reshape(8, 4)))
        # a value from outside the region (on one device) is the same on every device
        b_cpu = torch.tensor([10.0, 20.0])
        added = xs.enable_manual_sharding(x_cpu.to("xla"), mesh, ("data", "model")) + b_cpu.to("xla")
        r["outside"] = bool(torch.equal(xs.disable_manual_sharding(added, mesh, ("data", "model"), (8, 8)).cpu(),
                                        x_cpu + b_cpu.repeat(4)))
        # a sync inside the region computes the rest and leaves the manual tensors pending
        other = x_cpu.to("xla") + 1
        m = xs.enable_manual_sharding(x_cpu.to("xla"), mesh, (None, "model")) - 3
        xlanb.sync()
        r["sync_other_computed"] = base_node(other).buffer is not None
        r["sync_manual_pending"] = base_node(m).buffer is None
        back = xs.disable_manual_sharding(m * 1, mesh, (None, "model"), (8, 8))
        r["after_sync"] = bool(torch.equal(back.cpu(), x_cpu - 3))
        try:
            m.cpu()
            r["read"] = "no error"
        except RuntimeError as e:
            r["read"] = f"{type(e).__name__}: {e}"
        r["compiles_second_time"] = None
        c = compiles()
        y2 = xs.disable_manual_sharding(xs.enable_manual_sharding(x_cpu.to("xla"), mesh, ("data", "model")) * 2 + 1,
                                        mesh, ("data", "model"), (8, 8))
        y2.cpu()
        r["compiles_second_time"] = compiles() - c
        out[mode] = r

errors = {}
try:
    xs.enable_manual_sharding(torch.ones(9, 8).to("xla"), mesh, ("model", None))
except RuntimeError as e:
    errors["uneven"] = str(e)
from xlanb.spmd.manual import to_shards  # noqa: E402
try:
    to_shards(torch.ones(8, 8).to("xla"))
except RuntimeError as e:
    errors["unsharded"] = str(e)
try:
    xs.disable_manual_sharding(torch.ones(4, 2).to("xla"), mesh, ("data", "model"), (8, 8))
except RuntimeError as e:
    errors["not_manual"] = str(e)
try:
    xs.disable_manual_sharding(xs.enable_manual_sharding(torch.ones(8, 8).to("xla"), mesh, ("data", "model")),
                               mesh, ("data", "model"), (8, 4))
except RuntimeError as e:
    errors["shape"] = str(e)
try:
    xs.enable_manual_sharding(torch.ones(8, 8).to("xla").requires_grad_(), mesh, ("data", "model"))
except RuntimeError as e:
    errors["grad"] = str(e)
try:
    xs.mark_sharding(xs.enable_manual_sharding(torch.ones(8, 8).to("xla"), mesh, ("data", "model")) + 1, mesh,
                     ("data", None))
except RuntimeError as e:
    errors["mark"] = str(e)
out["errors"] = errors
report(**out)
