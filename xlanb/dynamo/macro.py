"""Calling a compiled FX graph: one lazy node, not an execution.

`ProgramCall(program)` is what the backend gives AOTAutograd. A call records **one node**
(`xlanb.fx_graph`) whose operands are the call's tensors, pending or not, and whose outputs are
new lazy tensors; in-place-mutated inputs are written back lazily (their old buffers are donated
at the sync, like any overwritten buffer). Nothing runs: the forward, the backward and the
optimizer step of a training step chain into one lazy graph, and the next sync compiles and runs
it as one executable, keyed by a handful of macro-nodes. In eager mode a call runs when it is made,
as a graph of its own (counted as a graph's execution, not an eager op's).

The node's local key names the Program, which holds the FX graph and its lowering: an evicted
executable is lowered again from it, never an error.
"""

from __future__ import annotations

import torch

from xlanb.capture import realize, rng
from xlanb.capture.frames import user_location
from xlanb.capture.nodes import new_node
from xlanb.capture.realize import to_cpu
from xlanb.capture.record import cpu_input
from xlanb.capture.tensor import LazyTensor, new_tensor, value, write_value
from xlanb.ir.node import NODE
from xlanb.state import runtime_state

_rt = runtime_state()
_NAME = "xlanb.fx_graph"


def _boxed(args: tuple) -> list:
    """AOTAutograd calls forwards boxed (one list, which the callee may empty) and some
    backwards unboxed; inputs are always tensors, so one list argument is the boxed form."""
    if len(args) == 1 and type(args[0]) is list:
        boxed = args[0]
        out = list(boxed)
        boxed.clear()
        return out
    return list(args)


class ProgramCall:
    """The compiled artifact AOTAutograd calls (boxed: one list of arguments)."""

    def __init__(self, program):
        self.program = program
        self.calls = 0
        self._boxed_call = True     # an instance attribute: dynamo's disable() wrapper copies it
        self.cpu_inputs = 0            # CPU tensors uploaded (e.g. a non-capturable step counter)
        n_operands = program.n_inputs + program.rng_ops
        self._key = (_NAME, (program,) + (NODE,) * n_operands, None, program.metas)
        self._item_keys = tuple(("xlanb.getitem", (NODE, i), None, m) for i, m in enumerate(program.metas))

    def __call__(self, *args):
        args = _boxed(args)
        program = self.program
        if _rt.comparing is not None:
            _rt.comparing.refuse(f"a torch.compile'd graph ({program.name}) ran inside xlanb.compare(): it runs as "
                                 "one program, not op by op, so its ops cannot be compared. Call the uncompiled "
                                 "function inside compare() (its ops are the same)")
        self.calls += 1
        mark = realize.eager_mark() if _rt.eager else 0
        operands = []
        for a in args:
            if type(a) is LazyTensor:
                operands.append(value(a))
            elif isinstance(a, torch.Tensor):
                self.cpu_inputs += 1
                operands.append(cpu_input(a))
            else:
                raise TypeError(f"xlanb: the compiled graph {program.name} got a {type(a).__name__} input")
        for _ in range(program.rng_ops):
            operands.append(rng.take_key())
        loc = user_location() if _rt.track_locations else None
        operands = tuple(operands)
        node = new_node(program, _NAME, (program,) + operands, None, operands, program.metas, self._key, loc)
        if _rt.observer is not None:
            _rt.observer(node)
        items = [new_node("xlanb.getitem", "xlanb.getitem", (node, i), None, (node,), m, k, loc)
                 for i, (m, k) in enumerate(zip(program.metas, self._item_keys))]
        base = program.n_results
        for k, (i, _) in enumerate(program.mutations):
            target = args[i]
            if type(target) is LazyTensor:
                write_value(target, items[base + k])
            else:                      # a CPU input written in place: its value is needed now
                with torch.no_grad():
                    target.copy_(to_cpu(new_tensor(items[base + k], items[base + k].meta), "CPU input of a "
                                        "compiled graph written in place"))
        outs = []
        for what, x in program.outputs:
            if what == "root":
                outs.append(new_tensor(items[x], items[x].meta))
            elif what == "input":
                outs.append(args[x])
            else:
                outs.append(x)
        if _rt.eager:        # eager mode runs a call when it is made: as one graph, not as an eager op
            realize.sync_eager(mark, program.name, op=False)
        return outs
