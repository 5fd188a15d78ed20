"""How capture makes IR nodes: the IR builds a node from its arguments alone (ir/node.py), and
capture passes what it knows when an op is recorded: the nn.Module path running now
(capture/scopes.py keeps it in `runtime_state().module_scope`) and which Python numbers become
graph inputs (the special_scalars setting)."""

from __future__ import annotations

import bisect
import math

import torch

from xlanb._config import config
from xlanb.ir import node as ir
from xlanb.ir.node import Scalar
from xlanb.state import runtime_state

_rt = runtime_state()
_new_scalar = object.__new__     # lift() makes one per use: skipping __init__'s frame is measurable


def current_scope() -> str | None:
    """The module path running now; None unless module scopes are recorded (a node pays one read)."""
    scope = _rt.module_scope
    return scope if scope is None or scope.__class__ is str else scope()


# The two constructors read the scope inline (current_scope's two lines): they run for every op recorded.

def new_node(op, name: str, args: tuple, kwargs: dict | None, operands: tuple, meta, key: tuple,
             location=None) -> ir.Node:
    """ir.node.new_node, in the module scope running now."""
    scope = _rt.module_scope
    if scope is not None and scope.__class__ is not str:
        scope = scope()
    return ir.new_node(op, name, args, kwargs, operands, meta, key, location, scope)


def make_node(op, name: str, args: tuple, kwargs: dict | None, meta, location=None) -> ir.Node:
    """ir.node.make_node, in the module scope running now."""
    scope = _rt.module_scope
    if scope is not None and scope.__class__ is not str:
        scope = scope()
    return ir.make_node(op, name, args, kwargs, meta, location, scope)


def lift(value):
    """Returns a Scalar for a liftable Python number (a graph input, so new values never
    recompile), else the value itself: 0, 1 and -1 stay constants while special_scalars is on."""
    t = type(value)
    if t is float or t is int:
        if (value == 0 or value == 1 or value == -1) and config().special_scalars:
            return value
        if t is int and not -(2 ** 63) <= value < 2 ** 63:
            return value
        s = _new_scalar(Scalar)
        s.value = value
        return s
    return value


def _range_edges() -> tuple:
    """Where a number passes the range of a dtype torch converts it to: each dtype's largest value,
    and the float just below its lowest; and where its reciprocal does, which kernels compute and
    convert too (celu's 1 / alpha: `celu(x, 1e-40)` is "value cannot be converted to type float
    without overflow"). Between two edges every number fits the same dtypes, and so does 1 / it."""
    edges = {0.0, 1.0}                     # bool
    dtypes = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
              torch.float32, torch.float64]
    dtypes += [getattr(torch, name) for name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")
               if hasattr(torch, name)]
    for dtype in dtypes:
        info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
        edges.add(float(info.max))
        edges.add(math.nextafter(float(info.min), -math.inf))
        if dtype.is_floating_point:
            edges.update((1.0 / float(info.max), -1.0 / float(info.max)))
    return tuple(sorted(edges))


_EDGES = _range_edges()


def scalar_class(value):
    """A lifted number in the keys of the caches that keep CPU's verdict on a signature: its type and
    which dtypes' ranges hold it. CPU refuses a number its kernel converts to the tensor's dtype with a
    check (`fill_(300)` on int8, `clamp(max=1e5)` on float16: "value cannot be converted to type int8_t
    without overflow"), and the graph's key, which holds the number's type alone (a new value never
    recompiles), would serve the verdict of an earlier value in range."""
    t = type(value)
    if t is complex:
        value = max(abs(value.real), abs(value.imag))
    if value != value:
        return (t, -1)
    return (t, bisect.bisect_left(_EDGES, value))
