"""mark_sharding under functional tracing (spmd/traced.py): in aot_function, its forward and backward
graphs hold xlanb::mark_sharding, and running them shards the output and the gradient as eager code
would; in torch.compile the graph holding it runs op by op, sharded, with no CPU fallback; on CPU
tensors the op is a copy."""

import numpy as np
import torch
from functorch.compile import aot_function, make_boxed_func

import xlanb
import xlanb.spmd as xs
from common import report
from xlanb.spmd import traced

mesh = xs.Mesh(np.arange(8), (8,), ("x",))
out = {}


def body(x):
    z = torch.sin(x)
    xs.mark_sharding(z, mesh, ("x",))
    return z * 3


graphs = []


def keep(gm, _):
    graphs.append(gm)
    return make_boxed_func(gm)


x_cpu = torch.randn(16, 4)
x = x_cpu.to("xla").requires_grad_(True)
y = aot_function(body, keep)(x)
y.sum().backward()
xlanb.sync()
out["graphs"] = [sum(str(n.target) == "xlanb.mark_sharding.default" for n in g.graph.nodes) for g in graphs]
out["y_spec"], out["grad_spec"] = xs.sharding_spec(y), xs.sharding_spec(x.grad)
out["y"] = float((y.detach().cpu() - torch.sin(x_cpu) * 3).abs().max())
out["grad"] = float((x.grad.cpu() - torch.cos(x_cpu) * 3).abs().max())

# torch.compile: the op in a dynamo graph (as a traced MarkShardingFunction puts it there)
text = traced.sharding_text(mesh, ("x", None))
f = torch.compile(lambda t: torch.ops.xlanb.mark_sharding(torch.sin(t), text) + 1, backend="xlanb")
z = f(x.detach())
xlanb.sync()
out["compiled_spec"] = xs.sharding_spec(z)
out["compiled"] = float((z.cpu() - (torch.sin(x_cpu) + 1)).abs().max())
out["compiled_fallbacks"] = xlanb.metrics.executed_fallback_ops()

# a spec the mesh cannot give: refused while tracing, at the mark_sharding line
def bad(x):
    z = torch.sin(x)
    xs.mark_sharding(z, mesh, ("y",))
    return z


try:
    aot_function(bad, keep)(x)
    out["bad"] = "nothing raised"
except ValueError as e:
    out["bad"] = str(e)

# on CPU tensors: a copy
c = torch.ops.xlanb.mark_sharding(x_cpu, text)
out["cpu_copy"] = bool(torch.equal(c, x_cpu)) and c.data_ptr() != x_cpu.data_ptr()
report(**out)
