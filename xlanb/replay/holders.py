"""Which xla tensors existed when a replayed function's traced call started (replay/trace.py).

Each graph input must be traced back to the tensor or storage that held it when the call started,
and each output's holder told apart from tensors the body made. The holders are found by walking
what the body can reach: its arguments (and the attributes of plain objects passed, such as an HF
cache, by path), the modules and optimizers among them and among the closure, the globals its code
names and a bound method's object, and the random-number state. When an input or output is held by
something that walk does not reach, the next traced call walks the whole heap instead
(`gc.get_objects`, about 0.1 s per million objects), so what cannot be found is never guessed.
"""

from __future__ import annotations

import gc
import types

import torch

from xlanb.capture.tensor import LazyTensor, Storage
from xlanb.state import runtime_state

_rt = runtime_state()
MAX_OBJECTS = 20_000            # a walk that visits more gives up and looks at the whole heap
_SKIP = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type, str, bytes,
         int, float, bool, type(None), complex)


class Holders:
    """The live holders (LazyTensor or Storage) the call may read or write, by node and by id."""

    def __init__(self, tensors: list, storages: list, paths: dict, whole_heap: bool):
        by_id = {id(s): s for s in storages}
        for t in tensors:
            if t._node is None:
                by_id.setdefault(id(t._storage), t._storage)
        self.whole_heap = whole_heap
        self.tensors = tensors
        self.storages = list(by_id.values())
        self.ids = {id(t) for t in tensors}
        self.ids.update(by_id)
        self.holder: dict = {}        # computed node -> the holder that held it
        for s in self.storages:
            self.holder.setdefault(s.node, s)
        for t in tensors:
            if t._node is not None:
                self.holder.setdefault(t._node, t)
        self.params = [t for t in tensors if t.requires_grad and t.grad_fn is None]
        self.grads = {id(p): p.grad for p in self.params}
        self.views = [t for t in tensors if t._node is None and t._views]
        # id(holder) -> (argument, path) for holders reached through a plain object argument
        self.paths = {id(t if t._node is not None else t._storage): where for t, where in paths.items()}


def find_holders(fn, args, kwargs, whole_heap: bool) -> Holders:
    """Every holder the call can reach (whole_heap: every live one)."""
    paths = object_paths(args, kwargs)
    if whole_heap:
        tensors, storages = [], []
        for o in gc.get_objects():
            t = type(o)
            if t is LazyTensor:
                tensors.append(o)
            elif t is Storage:
                storages.append(o)
        return Holders(tensors, storages, paths, True)
    walk = _Walk()
    for t in paths:
        walk.tensor(t)
    for a in list(args) + list(kwargs.values()):
        walk.visit(a, 0)
    f = getattr(fn, "__func__", fn)
    if hasattr(fn, "__self__"):
        walk.visit(fn.__self__, 0)
    for cell in getattr(f, "__closure__", None) or ():
        try:
            walk.visit(cell.cell_contents, 0)
        except ValueError:        # an empty cell
            pass
    code = getattr(f, "__code__", None)
    if code is not None:
        g = f.__globals__
        for name in code_names(code):
            if name in g:
                walk.visit(g[name], 1)
    if walk.overflow:
        return find_holders(fn, args, kwargs, True)
    return Holders(walk.tensors, [_rt.rng] if _rt.rng is not None else [], paths, False)


def code_names(code) -> set:
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return names


class _Walk:
    """A bounded walk of modules, optimizers, containers and plain objects, collecting xla tensors."""

    def __init__(self):
        self.tensors: list = []
        self.storages: list = []
        self.seen: set = set()
        self.overflow = False

    def tensor(self, t) -> None:
        if id(t) not in self.seen:
            self.seen.add(id(t))
            self.tensors.append(t)
            g = t.grad
            if type(g) is LazyTensor:
                self.tensor(g)

    def visit(self, x, depth: int) -> None:
        if len(self.seen) > MAX_OBJECTS:
            self.overflow = True
            return
        t = type(x)
        if t is LazyTensor:
            self.tensor(x)
            return
        if isinstance(x, _SKIP) or id(x) in self.seen or depth > 4:
            return
        self.seen.add(id(x))
        if isinstance(x, torch.nn.Module):
            for m in x.modules():
                self.seen.add(id(m))
                for d in (m._parameters, m._buffers):
                    for v in d.values():
                        if type(v) is LazyTensor:
                            self.tensor(v)
                for v in vars(m).values():
                    if type(v) is LazyTensor or isinstance(v, (list, tuple, dict)):
                        self.visit(v, depth + 1)
        elif isinstance(x, torch.optim.Optimizer):
            for group in x.param_groups:
                self.visit(group, depth + 1)
            for state in x.state.values():
                self.visit(state, depth + 1)
        elif isinstance(x, torch.optim.lr_scheduler.LRScheduler):
            self.visit(x.optimizer, depth + 1)
        elif t is list or t is tuple:
            for y in x:
                self.visit(y, depth + 1)
        elif t is dict:
            for y in x.values():
                self.visit(y, depth + 1)
        elif isinstance(x, torch.Tensor):
            return
        else:
            d = getattr(x, "__dict__", None)
            if type(d) is dict:
                for y in d.values():
                    self.visit(y, depth + 1)


def object_paths(args, kwargs) -> dict:
    """xla tensors inside plain object arguments (not modules, optimizers or callables), by path:
    tensor -> (argument position or keyword, ((kind, key), ...)). A later call passes another object
    of the same type (HF's generate() makes a new cache per call): its tensors are found by the same
    paths."""
    found: dict = {}
    for key, a in list(enumerate(args)) + list(kwargs.items()):
        if path_object(a):
            _paths(a, (), key, found, 0, set())
    return found


def path_object(a) -> bool:
    """A plain data object whose tensors are read by path (guarded by its type, not its identity)."""
    return not (type(a) is LazyTensor or isinstance(a, _SKIP) or callable(a) or isinstance(a, torch.Tensor)
                or isinstance(a, (list, tuple, dict))) and type(getattr(a, "__dict__", None)) is dict


def _paths(x, path: tuple, key, found: dict, depth: int, seen: set) -> None:
    if depth > 4 or id(x) in seen or len(found) > 4096:
        return
    t = type(x)
    if t is LazyTensor:
        found.setdefault(x, (key, path))
        return
    seen.add(id(x))
    if t is list or t is tuple:
        for i, y in enumerate(x):
            _paths(y, path + (("item", i),), key, found, depth + 1, seen)
    elif t is dict:
        for k, y in x.items():
            if type(k) in (str, int):
                _paths(y, path + (("item", k),), key, found, depth + 1, seen)
    elif not isinstance(x, _SKIP) and not callable(x) and not isinstance(x, torch.Tensor):
        d = getattr(x, "__dict__", None)
        if type(d) is dict:
            for k, y in d.items():
                _paths(y, path + (("attr", k),), key, found, depth + 1, seen)


def path_text(path) -> str:
    return "".join(f".{k}" if kind == "attr" else f"[{k!r}]" for kind, k in path)


def follow(obj, path: tuple):
    """The object at `path` inside `obj` (raises LookupError or AttributeError when it is not there)."""
    for kind, k in path:
        obj = getattr(obj, k) if kind == "attr" else obj[k]
    return obj
