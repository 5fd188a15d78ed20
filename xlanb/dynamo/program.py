"""An ATen FX graph (what AOTAutograd hands a backend) as one pure JAX function.

The FX graph becomes an xlanb IR graph (ir/graph.py) whose inputs are its placeholders, and that
graph goes through the same lowering as a lazily recorded one (`lower.to_jax.build_function`:
the one lowering table, torch's type promotion, the CPU fallback). So an op lowers the same way
whichever path recorded it.

- Placeholders become graph inputs with the metas of the fake tensors dynamo traced.
- `copy_(placeholder, value)` (an input mutation AOTAutograd kept in the graph: parameters,
  optimizer state, BatchNorm statistics) becomes an extra output; later uses of the placeholder
  read the new value. The caller writes those outputs back into the input tensors, lazily.
- A random op gets one extra input, the device RNG key of that draw.
- Python numbers in the FX graph are constants: dynamo specialised the graph on them.

A graph this cannot take (symbolic shapes, an FX target that is not an ATen op) raises
`NotAProgram` with the reason; the backend then replays the FX graph op by op on the lazy path.
"""

from __future__ import annotations

import dataclasses
import operator

import torch
import torch.fx as fx

from xlanb.capture.nodes import make_node
from xlanb.ir.node import Meta, Node, data_node, meta_of
from xlanb.lower.registry import lookup
from xlanb.lower.rules.sharding import MARK_SHARDING
from xlanb.lower.to_jax import build_function
from xlanb.runtime import executor

_COPY_ = torch.ops.aten.copy_.default
# The same value under another name (AOTAutograd keeps them for aliasing metadata): no node at all.
_IDENTITY = {"aten.alias.default", "aten.detach.default", "aten.lift_fresh_copy.default", "aten.lift_fresh.default"}
_KEY_META = None


class NotAProgram(Exception):
    """The FX graph cannot become one macro-node (the reason is the message)."""


class _Placeholder:
    """A non-None buffer for input nodes, so the graph walk and build_function see inputs."""

    def __repr__(self) -> str:
        return "<fx placeholder>"


_PLACEHOLDER = _Placeholder()


def _key_meta() -> Meta:
    global _KEY_META
    if _KEY_META is None:
        from xlanb.ir.node import intern_meta
        _KEY_META = intern_meta((2,), torch.uint32)
    return _KEY_META


def _input(meta: Meta) -> Node:
    return data_node(_PLACEHOLDER, meta)


def _static_meta(val, what: str) -> Meta:
    if not isinstance(val, torch.Tensor):
        raise NotAProgram(f"{what} is not a tensor ({type(val).__name__})")
    for d in (*val.shape, *val.stride(), val.storage_offset()):
        if not isinstance(d, int):
            raise NotAProgram(f"{what} has a symbolic shape {tuple(val.shape)} (dynamic shapes)")
    return meta_of(val)


def _arg(x, env):
    if isinstance(x, fx.Node):
        return env[x]
    if isinstance(x, (list, tuple)):
        return tuple(_arg(y, env) for y in x)
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise NotAProgram(f"symbolic number {x} in the graph (dynamic shapes)")
    if isinstance(x, torch.Tensor):
        raise NotAProgram("a tensor constant inside the FX graph")
    return x


class Program:
    """One FX graph, lowered once. Calls record it as one node (dynamo/macro.py); its JAX function
    is what that node lowers to, inside whatever lazy graph the node ends up in."""

    def __init__(self, gm: fx.GraphModule, kind: str, name: str):
        self.gm, self.kind, self.name = gm, kind, name
        self.ops = 0                   # ATen ops in the FX graph
        self.fallback_ops: list[str] = []   # ops with no lowering rule (torch CPU through a callback)
        env: dict = {}
        inputs: list[Node] = []        # the IR inputs: placeholders' tensors, then RNG keys
        self.n_inputs = 0              # placeholders (all tensors)
        self.mutations: list[tuple[int, Node]] = []    # (placeholder index, new value node)
        placeholder_of: dict = {}
        rng_ops = 0
        outputs = None
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                val = n.meta.get("val")
                if isinstance(val, torch.Tensor):
                    node = _input(_static_meta(val, f"input {n.target}"))
                    env[n] = node
                    placeholder_of[node] = self.n_inputs
                    inputs.append(node)
                    self.n_inputs += 1
                elif isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                    raise NotAProgram(f"input {n.target} is a symbolic number {val} (dynamic shapes)")
                else:
                    raise NotAProgram(f"input {n.target} is a {type(val).__name__}, not a tensor")
            elif n.op == "call_function":
                if n.target is operator.getitem:
                    whole, i = env[n.args[0]], n.args[1]
                    meta = whole.meta[i] if isinstance(whole.meta, tuple) else None
                    if meta is None:
                        raise NotAProgram(f"getitem of a single output in {n.name}")
                    env[n] = make_node("xlanb.getitem", "xlanb.getitem", (whole, i), None, meta)
                    continue
                if not isinstance(n.target, torch._ops.OpOverload):
                    raise NotAProgram(f"FX target {n.target} is not an ATen op")
                if n.target is _COPY_ and n.args[0] in env and env[n.args[0]] in placeholder_of:
                    dst, src = env[n.args[0]], env[n.args[1]]
                    src = _as_meta(src, dst.meta)
                    self.mutations.append((placeholder_of[dst], src))
                    env[n.args[0]] = src
                    env[n] = src
                    continue
                name = str(n.target)
                if name == MARK_SHARDING:       # a constraint in the graph: capture records it (spmd/traced.py)
                    raise NotAProgram("xs.mark_sharding inside the graph: run op by op, where the sharding "
                                      "constraint is an xlanb node the graph's mesh is found from")
                if name in _IDENTITY and isinstance(n.args[0], fx.Node):
                    source = env[n.args[0]]
                    meta = _metas(n.meta.get("val"), n.name)
                    env[n] = source if source.meta is meta else _as_meta(source, meta)
                    continue
                if n.target._schema.is_mutable:
                    raise NotAProgram(f"in-place op {name} inside the FX graph")
                val = n.meta.get("val")
                meta = _metas(val, n.name)
                args = _arg(n.args, env)
                kwargs = {k: _arg(v, env) for k, v in n.kwargs.items() if k != "generator"} or None
                rule = lookup(name)
                if rule is None and name not in self.fallback_ops:
                    self.fallback_ops.append(name)      # runs on torch CPU inside the executable
                if rule is not None and rule.rng:
                    key = _input(_key_meta())
                    inputs.append(key)
                    rng_ops += 1
                    args = (key,) + args
                env[n] = make_node(n.target, name, args, kwargs, meta)
                self.ops += 1
            elif n.op == "output":
                outputs = n.args[0]
            elif n.op == "get_attr":
                raise NotAProgram(f"a tensor attribute {n.target} inside the FX graph")
            else:
                raise NotAProgram(f"FX node kind {n.op}")
        self.rng_ops = rng_ops
        # outputs: ("root", position in roots) | ("input", placeholder index) | ("const", value)
        roots: list[Node] = []
        self.outputs: list[tuple] = []
        for o in outputs:
            if isinstance(o, fx.Node):
                node = env[o]
                if node in placeholder_of and all(node is not m for _, m in self.mutations):
                    self.outputs.append(("input", placeholder_of[node]))
                else:
                    self.outputs.append(("root", len(roots)))
                    roots.append(node)
            elif isinstance(o, (torch.SymInt, torch.SymFloat)):
                raise NotAProgram(f"symbolic output {o}")
            else:
                self.outputs.append(("const", o))
        self.n_results = len(roots)
        for _, value in self.mutations:
            roots.append(value)
        if not roots:
            roots_meta: tuple = ()
        else:
            roots_meta = tuple(r.meta for r in roots)
        self.metas = roots_meta
        graph = executor.new_graph(roots, name)
        walked = set(graph.order)
        # every input, in call order (unused ones too), as the program is called
        self.graph = graph = dataclasses.replace(graph, inputs=inputs,
                                                 order=graph.order + [n for n in inputs if n not in walked])
        self.fn = build_function(graph)[0] if roots else None

    def __repr__(self) -> str:
        return f"<xlanb FX program {self.name} ({self.kind}, {self.ops} ops)>"

    def __call__(self, *arrays):
        """The JAX function: (*input arrays) -> (*results, *mutated inputs' new values)."""
        return self.fn(*arrays)


def _metas(val, where: str):
    if isinstance(val, torch.Tensor):
        return _static_meta(val, f"output of {where}")
    if isinstance(val, (tuple, list)):
        return tuple(None if v is None else _static_meta(v, f"output of {where}") for v in val)
    if val is None:
        return ()
    raise NotAProgram(f"{where} returns a {type(val).__name__}")


def _as_meta(node: Node, meta: Meta) -> Node:
    """`copy_`'s value in the destination's shape and dtype."""
    if node.meta is meta:
        return node
    if node.meta.shape != meta.shape:
        from xlanb.ir.node import intern_meta
        node = make_node(torch.ops.aten.expand.default, "aten.expand.default", (node, meta.shape), None,
                         intern_meta(tuple(meta.shape), node.meta.dtype))
    if node.meta.dtype != meta.dtype:
        node = make_node(torch.ops.aten._to_copy.default, "aten._to_copy.default", (node,), {"dtype": meta.dtype},
                         meta)
    if node.meta is not meta:          # the same values in another layout (strides are metadata)
        node = make_node(torch.ops.aten.view.default, "aten.view.default", (node, meta.shape), None, meta)
    return node
