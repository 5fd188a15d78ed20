"""xlanb.DeviceLoader: batch N+1's upload is issued before step N's result is read (and before
step N runs); training through it equals training without it, on one device and on a mesh."""

import copy

import torch
import torch.nn.functional as F

import xlanb
import xlanb.spmd as xs
from xlanb import events, hooks
from xlanb.report import build_report, render_json
from common import max_diff, mlp, report

torch.manual_seed(0)
base = mlp()
batches = [(torch.randn(16, 16), torch.randint(0, 4, (16,))) for _ in range(5)]


def step(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def without_loader(mesh):
    model = copy.deepcopy(base).to("xla")
    if mesh is not None:
        xs.data_parallel(model, mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in batches:
        x, y = x.to("xla"), y.to("xla")
        if mesh is not None:
            xs.mark_sharding(x, mesh, ("data", None))
            xs.mark_sharding(y, mesh, ("data",))
        losses.append(step(model, opt, x, y).item())
    return model, losses


def with_loader(mesh):
    model = copy.deepcopy(base).to("xla")
    if mesh is not None:
        xs.data_parallel(model, mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, specs = [], []
    for x, y in xlanb.DeviceLoader(batches, mesh=mesh):
        specs.append(xs.sharding_spec(x))
        losses.append(step(model, opt, x, y).item())         # step N's result read inside the loop
    return model, losses, specs


def order(evs):
    """For each step N but the last: seq of BatchUpload N+1 and of step N's loss download."""
    uploads = {e.index: e.seq for e in evs if isinstance(e, events.BatchUpload)}
    reads = [e.seq for e in evs if isinstance(e, events.Transfer) and e.direction == "from_device"]
    return [{"upload_next": uploads[n + 1], "read": reads[n]} for n in range(len(reads) - 1)]


results = {}
for label, mesh in (("one", None), ("mesh", xs.get_1d_mesh("data"))):
    plain, plain_losses = without_loader(mesh)
    mark = hooks.mark()
    loaded, loaded_losses, specs = with_loader(mesh)
    evs = hooks.since(mark)
    data = render_json(build_report(evs))
    results[label] = {"param_diff": max_diff(plain.parameters(), loaded.parameters()),
                      "loss_diff": max(abs(a - b) for a, b in zip(plain_losses, loaded_losses)),
                      "order": order(evs), "specs": specs,
                      "waits": len([e for e in evs if isinstance(e, events.LoaderWait)]),
                      "report_loader": data["devices"]["loader"]}

# without reading inside the loop: batch N+1 goes up before step N is launched (the loader's sync)
model = copy.deepcopy(base).to("xla")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
mark = hooks.mark()
kept = [step(model, opt, x, y) for x, y in xlanb.DeviceLoader(batches, prefetch=2)]
evs = hooks.since(mark)
uploads = [e.index for e in evs if isinstance(e, events.BatchUpload)]
stream = [("upload", e.index) if isinstance(e, events.BatchUpload) else ("execute", None)
          for e in evs if isinstance(e, events.BatchUpload) or (isinstance(e, events.Execute) and not e.eager)]
report(results=results, stream=stream, final_losses=[float(k.item()) for k in kept][-1:])
