"""A 2x4 mesh: a Linear with sharded weights against the unsharded one, forward and backward; the
optimized HLO of a sharded matmul and the cell report's shardings and collectives."""

import jsonschema
import torch
import torch.nn as nn

import xlanb
import xlanb.spmd as xs
from xlanb import hooks
from xlanb.report import SCHEMA, build_report, render_json, render_text
from common import max_diff, report

torch.manual_seed(0)
mesh = xs.Mesh(range(8), (2, 4), ("data", "model"))
cpu = nn.Linear(32, 64)
x_cpu = torch.randn(8, 32)


def forward_backward(model, x):
    y = model(x)
    (y * y).sum().backward()
    xlanb.sync()
    return y, [p.grad for p in model.parameters()]


plain = nn.Linear(32, 64).to("xla")
plain.load_state_dict(cpu.state_dict())
y_plain, g_plain = forward_backward(plain, x_cpu.to("xla"))

sharded = nn.Linear(32, 64).to("xla")
sharded.load_state_dict(cpu.state_dict())
xs.mark_sharding(sharded.weight, mesh, ("model", None))      # output features over 'model'
xs.mark_sharding(sharded.bias, mesh, ("model",))
x = x_cpu.to("xla")
xs.mark_sharding(x, mesh, ("data", None))
y_sharded, g_sharded = forward_backward(sharded, x)

ref = cpu(x_cpu)
(ref * ref).sum().backward()

# a matmul over a sharded contraction dimension: each device holds partial sums, all-reduced
a = torch.randn(16, 64).to("xla")
b = torch.randn(64, 24).to("xla")
xs.mark_sharding(a, mesh, (None, "model"))
xs.mark_sharding(b, mesh, ("model", None))
mark = hooks.mark()
with hooks.recording_texts():
    c = a @ b
    optimized = xlanb.debug.hlo_text(c, stage="optimized")
    xlanb.sync()
    c.cpu()
data = render_json(build_report(hooks.since(mark)))
jsonschema.validate(data, SCHEMA)
graphs = data["devices"]["graphs"] if data.get("devices") else []
text = render_text(build_report(hooks.since(mark)))
print(text)
# torch_xla's DTensor-style entries, with torch.distributed.tensor's placements
from torch.distributed.tensor import Replicate, Shard  # noqa: E402

t = xs.xla_distribute_tensor(torch.randn(8, 16).to("xla"), mesh, [Shard(0), Shard(1)])
r = xs.xla_distribute_tensor(torch.randn(8, 16).to("xla"), mesh, [Replicate(), Shard(0)])


def shard_linears(name, module, mesh):
    if isinstance(module, nn.Linear):
        xs.xla_distribute_tensor(module.weight, mesh, [Replicate(), Shard(0)])


net = xs.xla_distribute_module(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to("xla"), mesh,
                               shard_linears)
distributed = {"both": xs.sharding_spec(t), "second": xs.sharding_spec(r),
               "module": [xs.sharding_spec(p) for p in net.parameters()]}
report(distributed=distributed, forward_vs_plain=max_diff([y_sharded], [y_plain]), grads_vs_plain=max_diff(g_sharded, g_plain),
       forward_vs_cpu=max_diff([y_sharded], [ref]), grads_vs_cpu=max_diff(g_sharded, [p.grad for p in cpu.parameters()]),
       y_sharding=xs.sharding_spec(y_sharded), weight_sharding=xs.sharding_spec(sharded.weight),
       hlo_has_all_reduce="all-reduce(" in optimized or "all-reduce-start(" in optimized,
       report_graphs=len(graphs),
       report_inputs=[p["text"] for p in graphs[-1]["inputs"]] if graphs else [],
       report_outputs=[p["text"] for p in graphs[-1]["outputs"]] if graphs else [],
       report_collectives=[c["op"] for c in graphs[-1]["collectives"]] if graphs else [],
       collective_groups=[c["groups"] for c in graphs[-1]["collectives"]] if graphs else [],
       collective_bytes=[c["bytes"] for c in graphs[-1]["collectives"]] if graphs else [],
       svg="<svg" in graphs[-1]["inputs"][0]["svg"] if graphs else False,
       text_has_all_reduce="all-reduce f32[16,24]" in text,
       matmul_diff=max_diff([c], [a.cpu() @ b.cpu()]),
       version=data["version"])
