"""The `"xlanb"` torch.compile backend: AOTAutograd with core-ATen decompositions, every FX graph
it hands over lowered once into a Program and called as one lazy node (dynamo/macro.py).

A graph that cannot be one node (symbolic shapes from `mark_dynamic` or automatic dynamic
shapes, an FX target that is not an ATen op) is replayed op by op on the lazy path instead: its
results are right and its lazy graph is keyed per concrete shape, at the lazy path's speed. The
`DynamoGraph` event says which path each graph took, and why.
"""

from __future__ import annotations

import itertools
import os
import re
import time

import torch

from xlanb import events
from xlanb.dynamo.breaks import collect_recompiles
from xlanb.dynamo.macro import ProgramCall, _boxed
from xlanb.dynamo.program import NotAProgram, Program
from xlanb.state import emit, runtime_state

_rt = runtime_state()
_ids = itertools.count()


class Replay:
    """An FX graph run op by op on the xla tensors: each ATen op is recorded lazily as usual."""

    def __init__(self, gm, reason: str):
        self.gm, self.reason = gm, reason
        self.calls = 0
        self._boxed_call = True     # an instance attribute: dynamo's disable() wrapper copies it

    def __call__(self, *args):
        args = _boxed(args)
        self.calls += 1
        outs = self.gm(*args)
        return list(outs) if isinstance(outs, (tuple, list)) else [outs]


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _user_line(gm) -> str:
    """`file.py:12` of the graph's first op (its innermost frame in dynamo's stack trace)."""
    for n in gm.graph.nodes:
        trace = n.meta.get("stack_trace")
        if trace:
            frames = _FRAME.findall(trace)
            if frames:
                return f"{os.path.basename(frames[-1][0])}:{frames[-1][1]}"
    return ""


def compiler(kind: str):
    def compile_fx(gm, example_inputs):
        collect_recompiles()
        name = f"fx{next(_ids)}_{kind}"
        t0 = time.perf_counter_ns()
        try:
            artifact = ProgramCall(Program(gm, kind, name))
            path, reason, ops = "macro", "", artifact.program.ops
            fallback = tuple(artifact.program.fallback_ops)
        except NotAProgram as e:
            artifact = Replay(gm, str(e))
            path, reason = "replay", str(e)
            ops = sum(1 for n in gm.graph.nodes if n.op == "call_function")
            fallback = ()
        emit(events.DynamoGraph(name=name, kind=kind, path=path, ops=ops, inputs=len(example_inputs),
                                reason=reason, location=_user_line(gm), ns=time.perf_counter_ns() - t0,
                                fallback_ops=fallback))
        return artifact
    return compile_fx


def make_backend():
    from torch._decomp import core_aten_decompositions
    from torch._dynamo.backends.common import aot_autograd
    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                        inference_compiler=compiler("inference"), decompositions=core_aten_decompositions(),
                        keep_inference_input_mutations=True)
