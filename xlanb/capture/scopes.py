"""Module scopes: the `nn.Module` path that was running when each op was recorded.

While a `recording_modules()` scope is open, two global module hooks push and pop the path of
the running module (`blocks.0.attn.qkv`, named as `named_modules()` names it from the outermost
module called) into `runtime_state().module_scope`, and capture/nodes.py passes it to each node it makes.
With no scope open the hooks are not installed (torch's module call then takes its fast path)
and `module_scope` is None: a node pays one attribute read.

Backward ops: torch numbers every autograd node it creates (its sequence number, one counter
per thread). Each module's forward is a span of those numbers; when it returns, the span goes into
a table of disjoint segments, each naming the innermost module whose forward made its nodes. While
the autograd engine runs a node, the ops it records carry the module of the node's number. Ops
outside every module (a loss written as a function, the optimizer) and backward nodes made outside
modules carry None; so do gradient accumulations into `.grad` (AccumulateGrad nodes have no
number). This costs O(1) per module call, no walk of the autograd graph.
"""

from __future__ import annotations

import bisect
import contextlib
import warnings

import torch
from torch.nn.modules import module as _nn_module

from xlanb.state import runtime_state

_rt = runtime_state()
_current_node = torch._C._current_autograd_node
_sequence_nr = torch._C._autograd._get_sequence_nr     # the number the next autograd node gets
_child_names: dict = {}                # (id(parent), id(child)) -> attribute name (checked at each use)
KEEP = 50_000                          # segments kept (the oldest half goes past twice that)


class Segments:
    """Disjoint spans of autograd sequence numbers, sorted, each with the innermost module path
    whose forward made the nodes numbered in it. Spans arrive as forwards return (inner first), so
    the segments an arriving span covers are the newest ones: a suffix of the list."""

    __slots__ = ("starts", "ends", "paths")

    def __init__(self):
        self.starts: list = []
        self.ends: list = []
        self.paths: list = []

    def add(self, start: int, end: int, path: str) -> None:
        starts, ends, paths = self.starts, self.ends, self.paths
        if len(starts) > 2 * KEEP:
            del starts[:KEEP], ends[:KEEP], paths[:KEEP]
        if not starts or ends[-1] <= start:          # no inner module made nodes (a leaf): one segment
            starts.append(start), ends.append(end), paths.append(path)
            return
        i = len(starts)
        while i and starts[i - 1] >= start:
            i -= 1
        inner = list(zip(starts[i:], ends[i:], paths[i:]))
        del starts[i:], ends[i:], paths[i:]
        at = start
        for a, b, p in inner:          # the gaps between inner modules' segments are this module's
            if a > at:
                starts.append(at), ends.append(a), paths.append(path)
            starts.append(a), ends.append(b), paths.append(p)
            at = b
        if at < end:
            starts.append(at), ends.append(end), paths.append(path)

    def path(self, number: int):
        i = bisect.bisect_right(self.starts, number) - 1
        return self.paths[i] if i >= 0 and number < self.ends[i] else None


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


def _pre(module, args) -> None:
    stack = _rt.module_stack
    if stack:
        parent, parent_path, _ = stack[-1]
        name = _child_name(parent, module)
        path = f"{parent_path}.{name}" if parent_path else name
    else:
        path = ""                      # the outermost module: its own ops carry ""
    stack.append((module, path, _sequence_nr()))
    _rt.module_scope = path


def _post(module, args, output) -> None:
    stack = _rt.module_stack
    while stack:
        entry = stack.pop()
        if entry[0] is module:
            end = _sequence_nr()
            if end > entry[2]:         # it made autograd nodes
                _rt.module_hooks[2].add(entry[2], end, entry[1])
            break
    _rt.module_scope = stack[-1][1] if stack else backward_scope


def backward_scope():
    """The path of the module whose forward made the autograd node now running (None outside backward)."""
    node = _current_node()
    if node is None:
        return None
    return _rt.module_hooks[2].path(node._sequence_nr())


def _pre_outside_dynamo(module, args) -> None:
    if _is_compiling():      # dynamo tracing a module call: the FX graph is one node, scoped outside
        return
    _pre(module, args)


def _post_outside_dynamo(module, args, output) -> None:
    if _is_compiling():
        return
    _post(module, args, output)


_is_compiling = torch.compiler.is_compiling
_hook_functions = [_pre, _post]      # what _install registers


def let_dynamo_trace(traceable) -> None:
    """Called when the torch.compile backend is registered (dynamo is imported then). dynamo
    traces a module call through the global hooks, and xlanb's files are on its skip list, so a
    scope hook would break every graph at its first module. `traceable(fn)` (dynamo/_torch_hooks)
    makes a copy of fn that dynamo may trace: the hooks become two thin ones that return at once
    while it traces."""
    if _hook_functions[0] is not _pre:
        return
    _hook_functions[:] = [traceable(_pre_outside_dynamo), traceable(_post_outside_dynamo)]
    hooks = _rt.module_hooks
    if hooks[1] is not None:          # a scope is open: register the new pair in the old one's place
        for handle in hooks[1]:
            handle.remove()
        hooks[1] = _register()


def _register() -> tuple:
    return (_nn_module.register_module_forward_pre_hook(_hook_functions[0]),
            _nn_module.register_module_forward_hook(_hook_functions[1]))


def _install() -> None:
    hooks = _rt.module_hooks
    # torch.compile(module) warns that global hooks fire once more for its OptimizedModule: for the
    # scopes that is one more push and pop (the compiled graph is one node), nothing to warn about
    warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks",
                            category=UserWarning)
    if hooks[1] is None:
        hooks[1] = _register()
        hooks[2] = Segments()
        _rt.module_scope = backward_scope


def _uninstall() -> None:
    hooks = _rt.module_hooks
    if hooks[1] is not None:
        for handle in hooks[1]:
            handle.remove()
        hooks[1] = None
    _rt.module_scope = None
    _rt.module_stack.clear()
    hooks[2] = None


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
