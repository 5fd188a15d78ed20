"""Module scopes: the `nn.Module` path that was running when each op was recorded.

While a `recording_modules()` scope is open, two global module hooks push and pop the path of
the running module (`blocks.0.attn.qkv`, named as `named_modules()` names it from the outermost
module called) into `runtime_state().module_scope`, and `ir.node.new_node` stores it on each node.
With no scope open the hooks are not installed (torch's module call then takes its fast path)
and `module_scope` is None: a node pays one attribute read.

Backward ops: when a module's forward returns, the autograd nodes it made (reachable from its
outputs without crossing its inputs) are labelled with its path in their `metadata`; while the
autograd engine runs one of them, the ops it records carry that path. Ops outside every module
(a loss written as a function, the optimizer) and backward nodes made outside modules carry None.
"""

from __future__ import annotations

import contextlib

import torch
from torch.nn.modules import module as _nn_module

from xlanb.state import runtime_state

_rt = runtime_state()
_current_node = torch._C._current_autograd_node
LABEL = "xlanb.scope"                  # the key of an autograd node's metadata holding its path
_child_names: dict = {}                # (id(parent), id(child)) -> attribute name (checked at each use)


def _child_name(parent, child) -> str:
    key = (id(parent), id(child))
    name = _child_names.get(key)
    if name is None or parent._modules.get(name) is not child:
        name = next((k for k, m in parent._modules.items() if m is child), None)
        if name is None:               # held in a container the parent did not call (a ModuleList)
            name = next((k for k, m in parent.named_modules(remove_duplicate=False) if m is child and k), None)
        if name is None:               # called by a module that does not own it
            name = type(child).__name__
        if len(_child_names) > 100_000:
            _child_names.clear()
        _child_names[key] = name
    return name


def _grad_fns(value, out: list) -> None:
    if isinstance(value, torch.Tensor):
        if value.grad_fn is not None:
            out.append(value.grad_fn)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _grad_fns(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _grad_fns(v, out)


def _pre(module, args) -> None:
    stack = _rt.module_stack
    if stack:
        parent, parent_path, _ = stack[-1]
        name = _child_name(parent, module)
        path = f"{parent_path}.{name}" if parent_path else name
    else:
        path = ""                      # the outermost module: its own ops carry ""
    inputs: list = []
    if torch.is_grad_enabled():
        _grad_fns(args, inputs)
    stack.append((module, path, inputs))
    _rt.module_scope = path


def _post(module, args, output) -> None:
    stack = _rt.module_stack
    while stack:
        entry = stack.pop()
        if entry[0] is module:
            break
    else:
        entry = None
    if entry is not None and torch.is_grad_enabled():
        _label(output, entry[1], entry[2])
    if stack:
        _rt.module_scope = stack[-1][1]
    else:
        _rt.module_scope = backward_scope
        _rt.module_hooks[2].clear()    # the outermost forward is done: hold no autograd node past it


def _label(output, path: str, inputs: list) -> None:
    """Labels the autograd nodes the module made with its path: the walk from its outputs stops at
    its inputs. An inner module labelled its own nodes first (the innermost module wins); the walk
    jumps from an inner module's outputs straight to its inputs, so each node is visited about once."""
    todo: list = []
    _grad_fns(output, todo)
    outputs = list(todo)
    jumps = _rt.module_hooks[2]        # id(an inner module's output node) -> that module's input nodes
    seen = {id(g) for g in inputs}
    while todo:
        g = todo.pop()
        key = id(g)
        if key in seen:
            continue
        seen.add(key)
        inner = jumps.get(key)
        if inner is not None:
            todo.extend(inner[1])
            continue
        meta = g.metadata
        if LABEL not in meta:
            meta[LABEL] = path
        todo.extend(n for n, _ in g.next_functions if n is not None)
    for g in outputs:                  # (g is kept alive while its id is a key)
        if id(g) not in {id(i) for i in inputs}:      # an identity module passes its input through
            jumps[id(g)] = (g, inputs)


def backward_scope():
    """The path of the module whose forward made the autograd node now running (None outside backward)."""
    node = _current_node()
    if node is None:
        return None
    return node.metadata.get(LABEL)


def _install() -> None:
    hooks = _rt.module_hooks
    if hooks[1] is None:
        hooks[1] = (_nn_module.register_module_forward_pre_hook(_pre),
                    _nn_module.register_module_forward_hook(_post))
        _rt.module_scope = backward_scope


def _uninstall() -> None:
    hooks = _rt.module_hooks
    if hooks[1] is not None:
        for handle in hooks[1]:
            handle.remove()
        hooks[1] = None
    _rt.module_scope = None
    _rt.module_stack.clear()
    hooks[2].clear()


@contextlib.contextmanager
def recording_modules():
    """While active, every recorded op remembers the nn.Module path that was running."""
    hooks = _rt.module_hooks
    hooks[0] += 1
    if hooks[0] == 1:
        _install()
    try:
        yield
    finally:
        hooks[0] -= 1
        if hooks[0] == 0:
            _uninstall()
