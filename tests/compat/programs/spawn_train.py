"""`xmp.spawn` data parallelism as torch_xla's scripts write it: each replica trains on its slice of
the batch and `xm.optimizer_step` averages the gradients.
`python -m xlanb.compat spawn_train.py N` (N replicas) or `... launch` (torch_xla.launch)."""

import json
import sys

import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr

BATCH = 8


def collectives(index, n):
    """The replica collectives' values on this replica."""
    t = torch.tensor([1.0, 2.0, 3.0, 4.0], device="xla") * (index + 1)
    out = {"sum": xm.all_reduce(xm.REDUCE_SUM, t).cpu().tolist(),
           "mean": xm.all_reduce(xm.REDUCE_SUM, t, scale=1.0 / n).cpu().tolist(),
           "max": xm.all_reduce(xm.REDUCE_MAX, t).cpu().tolist(),
           "gather": xm.all_gather(t.reshape(2, 2), dim=0).cpu().tolist(),
           "scatter": xm.reduce_scatter(xm.REDUCE_SUM, t, 1.0, 0, n).cpu().tolist()}
    ts = [t.clone(), torch.arange(2, device="xla") + index]
    xm.all_reduce(xm.REDUCE_SUM, ts)
    out["inplace"] = [ts[0].cpu().tolist(), ts[1].cpu().tolist()]
    out["rendezvous"] = [p.decode() for p in xm.rendezvous("hello", f"from {index}".encode())]
    out["mesh_reduce"] = xm.mesh_reduce("ordinal", index, sum)
    w = torch.nn.Linear(2, 1).to("xla")
    with torch.no_grad():
        w.weight.fill_(float(index + 5))
    xm.broadcast_master_param(w)               # every replica gets replica 0's parameters
    out["broadcast"] = w.weight.detach().cpu().reshape(-1).tolist()
    return out


def _mp_fn(index, steps):
    n = xr.world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).to(torch_xla.device())
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    data = [(torch.randn(BATCH, 6), torch.randint(0, 3, (BATCH,))) for _ in range(steps)]
    per = BATCH // n
    for x, y in data:
        x, y = x[index * per:(index + 1) * per].to(torch_xla.device()), y[index * per:(index + 1) * per].to("xla")
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        xm.optimizer_step(opt)
        xm.mark_step()
    result = {"world_size": n, "ordinal": xr.global_ordinal(), "master": xm.is_master_ordinal(),
              "params": [p.detach().cpu().reshape(-1).tolist() for p in model.parameters()],
              "collectives": collectives(index, n)}
    if xm.is_master_ordinal():
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "launch":           # torch_xla.launch: as many replicas as CPU_NUM_DEVICES says
        torch_xla.launch(_mp_fn, args=(3,))
    else:
        xmp.spawn(_mp_fn, args=(3,), nprocs=int(sys.argv[1]))
