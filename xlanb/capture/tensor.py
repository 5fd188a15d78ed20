"""LazyTensor: a wrapper tensor on `xla:0` whose value is an IR node.

A tensor that nobody aliases holds its node directly (`_node`), the fast common case.
Once a view is taken, the tensor and its views share a Storage cell holding the base
node; each view keeps the chain of view steps from that base. Reading a view applies
the chain (cached per storage version); writing through a view scatters the new value
back into the base (`xlanb.view_scatter`), so in-place ops are functionalised in Python.
"""

from __future__ import annotations

import sys
import weakref

import jax
import numpy as np
import torch
from jax.sharding import NamedSharding

from xlanb.capture.nodes import make_node
from xlanb.ir.node import Meta, Node, data_node, intern_meta
from xlanb.runtime.partition import CONSTRAINT, constraint_key
from xlanb.state import runtime_state

_make_wrapper = torch.Tensor._make_wrapper_subclass
_weakref = weakref.ref
_modules = sys.modules
_STRIDED = torch.strided
_rt = runtime_state()
# platforms whose buffers an xla tensor's DLPack export hands out from the device (a copy there): host
# memory, which np.from_dlpack and torch.from_dlpack take; elsewhere the export is a host copy
_DLPACK_FROM_DEVICE = frozenset({"cpu"})


def _exported_from_device(buffer) -> bool:
    return next(iter(buffer.devices())).platform in _DLPACK_FROM_DEVICE


class Storage:
    """The shared base value of a tensor and its views."""

    __slots__ = ("node", "version", "replay_hazard", "address", "untyped", "__weakref__")

    def __init__(self, node: Node):
        self.node = node
        self.version = 0
        self.replay_hazard = None       # a weakref to a view autograd would replay wrongly (capture.views)
        self.address = None             # its fake device address, given when first asked (storage_address)
        self.untyped = None             # a weakref to its torch.UntypedStorage (which holds this cell)


# Storage identity as torch defines it: each storage has its own address, a view's data_ptr() is
# its storage's plus storage_offset * itemsize. xla values live in device buffers that move, so
# the addresses are fake, given from a counter in an address range no host memory uses, each
# storage's bytes apart (code that compares ranges, like safetensors' sharing checks, sees
# disjoint storages as disjoint). Nothing may read through them.
_ADDRESS_ALIGN = 256
_next_address = [1 << 44]
_by_address: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def storage_nbytes(storage: Storage) -> int:
    meta = storage.node.meta
    return meta.numel * meta.dtype.itemsize


def storage_address(storage: Storage) -> int:
    if storage.address is None:
        bind_address(storage, reserve_address(storage_nbytes(storage)))
    return storage.address


def reserve_address(nbytes: int) -> int:
    """A fresh fake address with room for `nbytes`."""
    address = _next_address[0]
    _next_address[0] += (max(nbytes, 1) + 2 * _ADDRESS_ALIGN - 1) // _ADDRESS_ALIGN * _ADDRESS_ALIGN
    return address


def bind_address(storage: Storage, address: int) -> None:
    storage.address = address
    _by_address[address] = storage


def storage_at(address: int) -> Storage | None:
    """The Storage whose untyped_storage() has this data_ptr() (set_(storage, ...))."""
    return _by_address.get(address)


class ViewStep:
    """One view op applied to the base: `op(base, *args, **kwargs)` with output `meta`.

    Multi-output views (split, unbind) keep the op's full output metas and the index.
    """

    __slots__ = ("op", "name", "args", "kwargs", "meta", "index", "node_meta")

    def __init__(self, op, name, args, kwargs, meta, index=None, node_meta=None):
        self.op, self.name, self.args, self.kwargs, self.meta = op, name, args, kwargs, meta
        self.index, self.node_meta = index, node_meta

    def apply(self, base: Node) -> Node:
        if self.index is None:
            return make_node(self.op, self.name, (base,) + self.args, self.kwargs or None, self.meta)
        whole = make_node(self.op, self.name, (base,) + self.args, self.kwargs or None, self.node_meta)
        return make_node("xlanb.getitem", "xlanb.getitem", (whole, self.index), None, self.meta)

    def spec(self) -> tuple:
        return (self.name, self.args, tuple((self.kwargs or {}).items()), self.index)

    def on_host(self, host: torch.Tensor) -> torch.Tensor:
        """The view of a CPU tensor. Of a multi-output op, only the output taken is made where one
        view gives it (unbind's i-th is a select, split's a narrow): iterating over a tensor (`for x
        in t`, `all(t)`), whose items are unbind's outputs, reads each in O(1), not O(len(t))."""
        kwargs = self.kwargs or {}
        if self.index is None:
            return self.op(host, *self.args, **kwargs)
        one = _ONE_OUTPUT.get(self.name)
        if one is not None:
            return one(host, self.index, *self.args, **kwargs)
        return self.op(host, *self.args, **kwargs)[self.index]


def _split_one(x: torch.Tensor, i: int, size: int, dim: int = 0) -> torch.Tensor:
    return x.narrow(dim, i * size, min(size, x.shape[dim] - i * size))


_ONE_OUTPUT = {
    "aten.unbind.int": lambda x, i, dim=0: x.select(dim, i),
    "aten.split.Tensor": _split_one,
    "aten.split_with_sizes.default": lambda x, i, sizes, dim=0: x.narrow(dim, sum(sizes[:i]), sizes[i]),
}


def _compiling() -> bool:
    """Inside torch.compile's compilation (tracing, building guards). A repr there is for a message,
    and reading the value would run a graph per tensor: dynamo 2.10 builds a repr of every
    object a guard matches by identity (an optimizer with its state, on every first compile)."""
    guards = _modules.get("torch._guards")
    return guards is not None and guards.CompileContext.try_get() is not None


class LazyTensor(torch.Tensor):
    __slots__ = (
        "_node",          # the value's Node while nothing aliases the tensor, else None
        "_storage",       # the Storage shared with its views (once a view was taken), else None
        "_views",         # the ViewStep chain from the storage's base node to this tensor
        "_view_version",  # the storage version _view_node was computed at
        "_view_node",     # the base with _views applied, memoised per storage version
    )
    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self, *, tensor_contents=None):
        """torch's own format (`tensor([...], device='xla:0')`), from a CPU copy; while
        torch.compile compiles, a description that reads no value (see _compiling)."""
        if _compiling():
            return f"<xla tensor {tensor_meta(self)} on {self.device}>"
        with torch.no_grad():
            text = repr(self.detach().cpu())
        suffix = f", device='{self.device}'"
        if self.grad_fn is not None:
            suffix += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            suffix += ", requires_grad=True"
        return text[:-1] + suffix + ")"

    def __format__(self, format_spec: str) -> str:
        """As torch formats a plain (CPU, CUDA) tensor: a 0-dim one as its Python number, so
        `f"{loss}"` and `f"{loss:.4f}"` work (torch's own __format__ does this only for exact Tensors)."""
        if self.dim() == 0 and not _compiling():
            return self.detach().item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __coerce_same_metadata_as_tangent__(self, expected_metadata, expected_type=None):
        """AOT autograd (aot_function; torch.compile's default backends) traces an xla tensor as a
        plain tensor, then meets an xla tensor as the gradient of an output at run time: the same
        tensor is what it expected. (Its question for other tensor subclasses: None, their error.)"""
        return self if expected_type in (None, torch.Tensor) else None

    def data_ptr(self) -> int:
        """A fake address, unique to the tensor's storage (views share it, offset as torch offsets them)."""
        return storage_address(storage_of(self)) + self.storage_offset() * self.element_size()

    def untyped_storage(self) -> torch.UntypedStorage:
        """The storage shared with every view: data_ptr(), nbytes() and size() as torch answers them
        (its bytes stay on the device: read values through the tensor)."""
        s = storage_of(self)
        untyped = None if s.untyped is None else s.untyped()
        if untyped is None or untyped.nbytes() != storage_nbytes(s):
            untyped = untyped_of(s, self.device)
            s.untyped = _weakref(untyped)
        return untyped

    # Methods torch refuses for subclasses, or that must not pickle device state.
    def tolist(self):
        return self.cpu().tolist()

    def numpy(self, *, force: bool = False):
        """As torch answers for any tensor off the CPU (cuda's too): refused, or with force=True a
        host copy (detached, conjugate and negative bits resolved)."""
        if not force:
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first.")
        return self.detach().cpu().resolve_conj().resolve_neg().numpy()

    def __dlpack__(self, **kwargs):
        """A snapshot of the tensor's value as a DLPack capsule (a device copy of its buffer, which JAX
        exports), so `jnp.from_dlpack(t)`, `np.from_dlpack(t)` and `torch.from_dlpack(t)` take it.
        A snapshot, not the buffer itself: xla buffers are immutable and shared (a graph's cached
        values, other tensors), and torch.from_dlpack makes a writable CPU tensor over what it gets,
        so an alias would let a write there change the xla tensor behind xlanb's back. copy=False
        (share or fail) is refused; torch's own method would ask torch_xla. Off the CPU (JAX cannot
        export a TPU's buffers) the snapshot is a host copy, a CPU capsule."""
        if self.requires_grad:
            torch.empty(0, requires_grad=True).__dlpack__()      # torch's error for such a tensor
        if kwargs.pop("copy", None) is False:
            raise BufferError("an xla tensor's buffer cannot be shared through DLPack (it is immutable and "
                              "may be shared by other tensors): export with copy=None or copy=True")
        buffer = _jax_value(self)
        if _exported_from_device(buffer):
            return jax.device_put(buffer, buffer.sharding, may_alias=False).__dlpack__(**kwargs)
        return np.array(buffer).__dlpack__(**kwargs)

    def __dlpack_device__(self):
        """The device of the tensor's buffer (its base's, computed: no copy of a view is made twice, as
        consumers ask this before `__dlpack__`); the host's where the snapshot is a host copy."""
        buffer = computed(self, "DLPack export").buffer
        return buffer.__dlpack_device__() if _exported_from_device(buffer) else (1, 0)

    def pin_memory(self, device=None):
        """As torch answers for any tensor off the CPU (cuda's too)."""
        raise RuntimeError(f"cannot pin '{self.device}' tensor: only dense CPU tensors can be pinned. "
                           "Pin a host copy instead: t.cpu().pin_memory()")

    def __reduce_ex__(self, protocol):
        """Pickling (torch.save) stores a CPU tensor, so checkpoints load anywhere."""
        return self.detach().cpu().requires_grad_(self.requires_grad).__reduce_ex__(protocol)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            new = self.clone()
        new.requires_grad_(self.requires_grad)
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        new.__dict__.update({k: v for k, v in self.__dict__.items()})
        memo[id(self)] = new
        return new


def _jax_value(t: LazyTensor):
    """t's value as one jax array of its shape: its own buffer once computed when nothing aliases it,
    else a computed copy (a view's elements, conjugate and negative bits resolved)."""
    with torch.no_grad():
        if t._node is None or t.is_conj() or t.is_neg():
            t = t.detach().resolve_conj().resolve_neg().clone()
        return computed(t, "DLPack export").buffer


def new_tensor(node: Node, meta: Meta) -> LazyTensor:
    """A fresh, unaliased tensor holding `node`."""
    if meta.mkstrides is None:
        t = _make_wrapper(LazyTensor, meta.shape, None, None, None, meta.dtype, _STRIDED, _rt.device)
    else:
        t = _make_wrapper(LazyTensor, meta.shape, meta.strides, meta.offset, None, meta.dtype, _STRIDED, _rt.device)
    t._node = node
    t._storage = None
    if _rt.tensor_listener is not None:
        _rt.tensor_listener(t)
    if node.buffer is None:
        pending = _rt.pending             # mark_pending, inlined: this runs for every op
        pending.append(_weakref(t))
        if len(pending) > _rt.prune_at:
            prune_pending()
        if _rt.observer is not None:
            _rt.observer(node)
    return t


def new_view(storage: Storage, chain: tuple, meta: Meta) -> LazyTensor:
    t = _make_wrapper(LazyTensor, meta.shape, meta.strides, meta.offset, None, meta.dtype, _STRIDED, _rt.device)
    t._node = None
    t._storage = storage
    t._views = chain
    t._view_version = -1
    t._view_node = None
    if _rt.tensor_listener is not None:
        _rt.tensor_listener(t)
    return t


def mark_pending(holder) -> None:
    pending = _rt.pending
    pending.append(weakref.ref(holder))
    if len(pending) > _rt.prune_at:
        prune_pending()


def prune_pending() -> None:
    """Drops dead and computed entries (the list only grows between syncs)."""
    live = []
    for ref in _rt.pending:
        h = ref()
        if h is not None and holder_node(h).buffer is None:
            live.append(ref)
    _rt.pending[:] = live
    _rt.prune_at = max(4096, 2 * len(live))


def holder_node(h) -> Node:
    """The base node of a holder (a LazyTensor or a Storage)."""
    if type(h) is Storage:
        return h.node
    n = h._node
    return n if n is not None else h._storage.node


def storage_of(t: LazyTensor) -> Storage:
    """The tensor's storage cell, creating it (aliasing the tensor) on first use."""
    s = t._storage
    if s is None:
        s = Storage(t._node)
        t._storage = s
        t._node = None
        t._views = ()
        t._view_version = -1
        t._view_node = None
        if s.node.buffer is None:
            mark_pending(s)
    return s


# capture.storages makes a Storage's torch.UntypedStorage (its fake address, and the storage methods
# that would read through it or allocate on the device); it puts its maker here when imported
untyped_of = None


# capture.growth folds a view chain over a pending cat (the newest end of a growing tensor) into one
# piece; it records nodes, so it sits above this module, and it puts its folder here when imported
fold_cat_views = None

# capture.realize computes a tensor (`realize(t, cause)` -> its computed Node) for the DLPack export;
# it runs graphs, so it sits above this module, and it puts its function here when imported
computed = None


def value(t: LazyTensor) -> Node:
    """The node holding `t`'s current value."""
    n = t._node
    if n is not None:
        return n
    s = t._storage
    if not t._views:
        return s.node
    if t._view_version == s.version:
        return t._view_node
    n = s.node
    for i, step in enumerate(t._views):
        if n.name == "aten.cat.default" and n.buffer is None and fold_cat_views is not None:
            folded = fold_cat_views(t._views[i:], n)       # maybe the newest end of a growing tensor
            if folded is not None:
                n = folded
                break
        n = step.apply(n)
    t._view_version = s.version
    t._view_node = n
    return n


def base_node(t: LazyTensor) -> Node:
    n = t._node
    return n if n is not None else t._storage.node


def view_chain(t: LazyTensor) -> tuple:
    return () if t._node is not None else t._views


def holder_of(t: LazyTensor):
    """What holds `t`'s base value: the tensor itself, or its storage."""
    return t if t._node is not None else t._storage


def rebind_holder(holder, node: Node) -> None:
    """A computed value into a holder, recording nothing (a replayed call's outputs): a tensor with a
    value of its own takes `node`; a storage (or the storage under a view) takes it as its next
    version, so its views read it."""
    if type(holder) is LazyTensor:
        if holder._node is not None:
            holder._node = node
            return
        holder = holder._storage
    holder.node = node
    holder.version += 1


def view_spec(t: LazyTensor) -> tuple:
    """The view chain from t's storage to t, as a hashable-where-possible spec (one per step)."""
    return tuple(step.spec() for step in t._views)


def computed_view(t: LazyTensor) -> tuple | None:
    """(its storage's node, the key of where t sits in it: that node's meta and t's view spec) when t
    reads a computed storage through a chain of views (an empty one included), for the eager fast
    paths that compute the view inside the op's executable; None for a tensor with a value of its
    own, a pending storage, the conj or neg bit, or a view argument with no hashable form."""
    if t._node is not None:
        return None
    base = t._storage.node
    if base.buffer is None or t.is_conj() or t.is_neg():
        return None
    where = (base.meta, view_spec(t))
    try:
        hash(where)
    except TypeError:
        return None
    return base, where


def forget_view(t: LazyTensor) -> None:
    """Drops a view's memo of its value (the storage under it is about to be rebound)."""
    t._view_node = None
    t._view_version = -1


def check_no_replay_hazard(storage) -> None:
    """An in-place write makes torch rebuild the autograd history of the storage's views by
    replaying their view ops on the base (a subclass gets no as_strided replay). For an
    as_strided view that reads memory outside the tensor it was taken from, the replayed
    gradient differs from CPU's (which is rebuilt with as_strided over the whole base), so the
    write is refused while such a view takes part in autograd."""
    view = storage.replay_hazard()
    if view is None or not view.requires_grad:
        storage.replay_hazard = None
        return
    raise NotImplementedError(
        f"an in-place write to a tensor while an as_strided view of it (shape {list(view.shape)}) reads memory "
        "outside the tensor it was taken from and takes part in autograd is not supported on xla: torch rebuilds "
        "that view's gradient by replaying it, which differs from CPU. Take as_strided of the base tensor "
        "(or .clone() before as_strided), or write out of place")


# capture.fills uploads an optimizer's state made by a fill (zeros_like, full_like) and written in place
# before the sync; it sits above this module, and puts its fill names and its note here when imported
fill_names: frozenset = frozenset()
note_fill = None


def write(t: LazyTensor, new: Node) -> None:
    """Makes `new` (same shape and dtype as t) the value of t, through its views."""
    if _rt.observer is not None:
        _rt.observer(new)
    n = t._node
    if n is not None:
        if n.buffer is None:
            if n.name in fill_names:
                note_fill(t, n, new)
        else:
            _rt.overwritten.add(n)
            if _rt.several_devices or (_rt.several_devices is None and _rt.count_devices()):
                new = keep_sharding(n, new)
        t._node = new
        mark_pending(t)
        return
    s = t._storage
    if s.replay_hazard is not None:
        check_no_replay_hazard(s)
    old = s.node
    if t._views:
        chain = view_spec(t)
        new = make_node("xlanb.view_scatter", "xlanb.view_scatter", (old, new, chain), None, old.meta)
    if old.buffer is None:
        if old.name in fill_names:
            note_fill(s, old, new)
    else:
        _rt.overwritten.add(old)
        if _rt.several_devices or (_rt.several_devices is None and _rt.count_devices()):
            new = keep_sharding(old, new)
    s.node = new
    s.version += 1
    mark_pending(s)


def keep_sharding(old: Node, new: Node) -> Node:
    """A tensor written in place keeps the sharding its buffer had (torch_xla keeps a tensor's
    sharding annotation the same way): the new value gets a sharding constraint."""
    s = old.buffer.sharding
    if type(s) is not NamedSharding or len(s.device_set) == 1 or new.name == CONSTRAINT:
        return new
    if new.buffer is not None and new.buffer.sharding == s:
        return new
    return make_node(CONSTRAINT, CONSTRAINT, (new, constraint_key(s, len(old.meta.shape))), None, new.meta)


def tensor_meta(t: LazyTensor) -> Meta:
    n = t._node
    if n is not None:
        return n.meta
    if t._views:
        return t._views[-1].meta
    return t._storage.node.meta


def write_value(target: LazyTensor, node: Node) -> None:
    """Writes node into target, casting to target's dtype (in-place ops keep self's dtype)."""
    tm = tensor_meta(target)
    nm = node.meta
    if nm is not tm:
        if nm.shape != tm.shape:
            node = make_node(torch.ops.aten.expand.default, "aten.expand.default", (node, tm.shape), None,
                             intern_meta(tuple(tm.shape), nm.dtype))
        if nm.dtype != tm.dtype:
            node = make_node(torch.ops.aten._to_copy.default, "aten._to_copy.default", (node,), {"dtype": tm.dtype}, tm)
        elif node.meta is not tm:
            node = _relabel(node, tm)
    write(target, node)


def _relabel(node: Node, meta: Meta) -> Node:
    """Same computation, the target's layout (strides are not part of the value)."""
    if node.buffer is not None:
        return data_node(node.buffer, meta)
    return make_node(node.op, node.name, node.args, node.kwargs, meta, node.location)

