"""Bad shardings raise at the user's line, naming the tensor, the spec and the mesh; nothing
pending is lost."""

import traceback

import torch

import xlanb
import xlanb.spmd as xs
from common import report

mesh = xs.Mesh(range(8), (2, 4), ("data", "model"))
weights = torch.randn(10, 6).to("xla")
pending = weights * 2                     # pending work that an error must not lose
errors = {}


def attempt(label, fn):
    try:
        fn()
    except (ValueError, TypeError) as e:
        mine = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]
        errors[label] = {"type": type(e).__name__, "message": str(e), "line": mine[-1].line}


attempt("unknown_axis", lambda: xs.mark_sharding(weights, mesh, ("batch", None)))
attempt("too_long", lambda: xs.mark_sharding(weights, mesh, ("data", None, None)))
attempt("pending_extra_axis", lambda: xs.mark_sharding(pending, mesh, (None, "model", "data")))
attempt("too_big", lambda: xs.Mesh(range(16), (4, 4), ("data", "model")))
attempt("cpu_tensor", lambda: xs.mark_sharding(torch.randn(4, 4), mesh, ("data", None)))
attempt("loader_scalar", lambda: list(xlanb.DeviceLoader([torch.tensor(5.0)], mesh=mesh)))
attempt("loader_axis", lambda: xlanb.DeviceLoader([torch.randn(8, 2)], mesh=mesh, data_axis="batch"))
value = pending.cpu()
report(errors=errors, pending_kept=bool(torch.equal(value, weights.cpu() * 2)),
       weights_one_device=xs.get_sharding(weights) is None, pending_one_device=xs.get_sharding(pending) is None)
