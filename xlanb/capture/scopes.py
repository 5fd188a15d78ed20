"""Module scopes: the `nn.Module` path that was running when each op was recorded.

While a `recording_modules()` scope is open, `nn.Module.__call__` is wrapped: each module call pushes
and pops the path of the running module (`blocks.0.attn.qkv`, named as `named_modules()` names it from
the outermost module called; a module the autograd engine runs again, a checkpoint's recompute, is
named as in the last outermost module) into `runtime_state().module_scope`, and capture/nodes.py
passes it to each node it makes. A wrapper, not global module hooks: with a global hook registered,
every module call takes torch's hooked path (`_call_impl`'s `inner`), which cost W3's step 45 us for
its four module calls against 0.1 us through the wrapper. With no scope open `__call__` is torch's
own and `module_scope` is None: a node pays one attribute read.

Backward ops: torch numbers every autograd node it creates (its sequence number, one counter
per thread, which only grows). When a forward starts, the number the next node gets is marked with
its path, and when it returns, with its caller's (None outside every module): the innermost module
running when a node was made is the last mark at or before its number. A forward run by the autograd
engine (a checkpointed module recomputed during backward, on the engine's thread and its counter)
marks nothing: its ops carry its path, and the marks of the forward that was recorded stay. While the autograd engine runs
a node, the ops it records carry the module of the node's number. Ops outside every module (a loss
written as a function, the optimizer) and backward nodes made outside modules carry None; so do
gradient accumulations into `.grad` (AccumulateGrad nodes have no number). This costs two appends per
module call, no walk of the autograd graph.
"""

from __future__ import annotations

import bisect
import contextlib
import weakref

import torch
from torch.nn.modules import module as _nn_module

from xlanb.state import runtime_state

_rt = runtime_state()
_current_node = torch._C._current_autograd_node
_sequence_nr = torch._C._autograd._get_sequence_nr     # the number the next autograd node gets
_child_names: dict = {}                # (id(parent), id(child)) -> attribute name (checked at each use)
KEEP = 50_000                          # marks kept (the oldest half goes past twice that)


class Segments:
    """The module path in force from each autograd sequence number on, as sorted marks (the numbers
    only grow). A mark at the number of the one before replaces it: no node was numbered between,
    so a forward that made no autograd node (under no_grad) leaves nothing behind."""

    __slots__ = ("starts", "paths", "last")

    def __init__(self):
        self.starts: list = []
        self.paths: list = []
        self.last = (-1, None)       # the last number asked and its path: a node's ops ask in a row

    def mark(self, number: int, path) -> None:
        starts, paths = self.starts, self.paths
        self.last = (-1, None)
        if starts and starts[-1] >= number:
            if starts[-1] == number:
                paths[-1] = path
                return
            i = bisect.bisect_left(starts, number)       # another thread's counter: keep the marks sorted
            del starts[i:], paths[i:]
        if len(starts) > 2 * KEEP:
            del starts[:KEEP], paths[:KEEP]
        starts.append(number)
        paths.append(path)

    def path(self, number: int):
        last = self.last
        if last[0] == number:
            return last[1]
        i = bisect.bisect_right(self.starts, number) - 1
        path = self.paths[i] if i >= 0 else None
        self.last = (number, path)
        return path


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


def _path_in(root, module) -> str:
    """`module`'s dotted path in `root` (named_modules' name), or its class name when not in it."""
    key = (id(root), id(module))
    path = _child_names.get(key)
    if path is None or root.get_submodule(path) is not module:
        path = next((k for k, m in root.named_modules(remove_duplicate=False) if m is module), type(module).__name__)
        _child_names[key] = path
    return path


def _child_path(parent, parent_path: str, child) -> str:
    """The path of `child` called by `parent` (at `parent_path`); memoized, checked at each use."""
    key = (id(parent), id(child), parent_path)
    known = _child_names.get(key)
    if known is not None and parent._modules.get(known[0]) is child:
        return known[1]
    name = _child_name(parent, child)
    path = f"{parent_path}.{name}" if parent_path else name
    if parent._modules.get(name) is child:     # a name that is not an attribute is looked up each time
        _child_names[key] = (name, path)
    return path


def backward_scope():
    """The path of the module whose forward made the autograd node now running (None outside backward)."""
    node = _current_node()
    if node is None:
        return None
    marks = _rt.module_hooks[2]
    return marks.path(node._sequence_nr()) if marks is not None else None


_calls = [_nn_module.Module.__call__]      # what the wrapper calls: Module.__call__ as it was when it went in
# True while the wrapper sits under another library's wrapper of Module.__call__ (one put over it while a
# scope was open, which calls it): a new scope then records through that chain instead of wrapping
# it again (which would call itself), unless the other library has put back what it found
_left_under = [False]


def _scoped_call(self, *args, **kwargs):
    """nn.Module.__call__ while module scopes are recorded: the module's path around torch's call.
    A scope closed while another library's wrapper of `__call__` sat on this one leaves it a
    pass-through (no marks to keep: module_hooks[2] is None). One frame: the push and the pop are
    written inline (W3's four module calls a step; two helper calls cost a fifth of the wrapper)."""
    hooks = _rt.module_hooks
    marks = hooks[2]
    if marks is None:
        return _calls[0](self, *args, **kwargs)
    stack = _rt.module_stack
    forward = _current_node() is None      # not a forward the autograd engine runs (a checkpoint's recompute)
    if stack:
        parent, parent_path = stack[-1]
        path = _child_path(parent, parent_path, self)
    elif forward:
        path = ""                          # the outermost module: its own ops carry ""
        root = hooks[3]
        if root is None or root() is not self:
            hooks[3] = weakref.ref(self)
    else:                                  # recomputed in backward: named as in the last outermost module
        root = hooks[3] and hooks[3]()
        path = _path_in(root, self) if root is not None else ""
    stack.append((self, path))
    if forward:                            # the engine's thread has a counter of its own
        marks.mark(_sequence_nr(), path)
    _rt.module_scope = path
    try:
        return _calls[0](self, *args, **kwargs)
    finally:        # a forward that raises (a user's error, a checkpoint's recompute stopping early) pops too
        if hooks[2] is marks:              # the scope was not closed inside the call
            while stack:
                if stack.pop()[0] is self:
                    break
            outer = stack[-1][1] if stack else None
            if _current_node() is None:
                marks.mark(_sequence_nr(), outer)
            _rt.module_scope = backward_scope if outer is None else outer


def _scoped_call_outside_dynamo(self, *args, **kwargs):
    if _is_compiling():         # dynamo tracing a module call: the FX graph is one node, scoped outside
        return _calls[0](self, *args, **kwargs)
    return _scoped_call(self, *args, **kwargs)


_is_compiling = torch.compiler.is_compiling
_wrapper = [_scoped_call]      # what goes in as Module.__call__


def let_dynamo_trace(traceable) -> None:
    """Called when the torch.compile backend is registered (dynamo is imported then). dynamo
    traces a module call through `Module.__call__`, and xlanb's files are on its skip list, so the
    wrapper would break every graph at its first module. `traceable(fn)` (dynamo/_torch_hooks)
    makes a copy of fn that dynamo may trace: the wrapper becomes one that calls straight through
    while it traces."""
    if _wrapper[0] is not _scoped_call:
        return
    _wrapper[0] = traceable(_scoped_call_outside_dynamo)
    hooks = _rt.module_hooks
    if hooks[1] is not None:             # a scope is open: swap in place
        if _nn_module.Module.__call__ is hooks[1]:
            _nn_module.Module.__call__ = _wrapper[0]
        hooks[1] = _wrapper[0]


def _install() -> None:
    hooks = _rt.module_hooks
    if hooks[1] is None:
        current = _nn_module.Module.__call__
        if current is not _wrapper[0] and not (_left_under[0] and current is not _calls[0]):
            _calls[0] = current            # torch's, or another library's wrapper: called through
            _nn_module.Module.__call__ = current = _wrapper[0]
        _left_under[0] = current is not _wrapper[0]      # still under the other library's wrapper
        hooks[1] = _wrapper[0]
        hooks[2] = Segments()
        _rt.module_scope = backward_scope


def _uninstall() -> None:
    hooks = _rt.module_hooks
    if hooks[1] is not None:
        if _nn_module.Module.__call__ is hooks[1]:
            _nn_module.Module.__call__ = _calls[0]
            _left_under[0] = False
        else:          # another library wrapped it since (and calls it): it stays there, a pass-through
            _left_under[0] = True
        hooks[1] = None
    _rt.module_scope = None
    _rt.module_stack.clear()
    hooks[2] = hooks[3] = None


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
