"""The one IR node type, interned tensor metadata, and lifted Python scalars.

A Node is an ATen call with its operands replaced by Nodes (and lifted Scalars). Every
node, on every capture path, is made by `new_node`; its local key (`local_key`) is the
op, its constant arguments with operands blanked out, and its output meta: equal local
keys plus equal operand positions mean equal computations (ir/graph.py builds the
graph's CacheKey from them). A computed node holds its device buffer, drops its
operands (so history does not pile up in memory) and becomes a graph input.
"""

from __future__ import annotations

import torch

# Interned metadata ---------------------------------------------------------------------

_DTYPE_SHORT = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "s64", torch.int32: "s32", torch.int16: "s16", torch.int8: "s8",
    torch.uint8: "u8", torch.uint16: "u16", torch.uint32: "u32", torch.uint64: "u64",
    torch.bool: "pred", torch.complex64: "c64", torch.complex128: "c128",
    torch.float8_e4m3fn: "f8e4m3fn", torch.float8_e5m2: "f8e5m2",
}


def dtype_text(dtype: torch.dtype) -> str:
    return _DTYPE_SHORT.get(dtype, str(dtype).removeprefix("torch."))


def contiguous_strides(shape: tuple) -> tuple:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


class Meta:
    """Shape, dtype, strides and storage offset of a tensor; interned, so identity is equality."""

    __slots__ = ("shape", "dtype", "strides", "offset", "mkstrides", "numel", "text", "__weakref__")

    def __repr__(self) -> str:
        return self.text

    def empty(self, device: str = "meta") -> torch.Tensor:
        """An uninitialised tensor with exactly this layout: on "meta", for running torch's meta
        kernels; on "cpu", for replaying views on a value as torch lays it out."""
        if self.offset == 0:
            return torch.empty_strided(self.shape, self.strides, dtype=self.dtype, device=device)
        extent = self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.strides) if d > 0) + 1
        base = torch.empty(extent, dtype=self.dtype, device=device)
        return base.as_strided(self.shape, self.strides, self.offset)


_metas: dict[tuple, Meta] = {}


def intern_meta(shape: tuple, dtype: torch.dtype, strides: tuple | None = None, offset: int = 0) -> Meta:
    contiguous = contiguous_strides(shape)
    if strides is None:
        strides = contiguous
    key = (shape, dtype, strides, offset)
    m = _metas.get(key)
    if m is None:
        m = Meta()
        m.shape, m.dtype, m.strides, m.offset = shape, dtype, strides, offset
        # _make_wrapper_subclass takes strides=None for the common contiguous case (faster)
        m.mkstrides = None if (strides == contiguous and offset == 0) else strides
        n = 1
        for d in shape:
            n *= d
        m.numel = n
        m.text = f"{dtype_text(dtype)}[{','.join(map(str, shape))}]"
        _metas[key] = m
    return m


def meta_text(meta) -> str:
    """`f32[4,4]`, or `(f32[4], s64[4])` for a multi-output op (`none` where nothing is computed)."""
    if isinstance(meta, tuple):
        return "(" + ", ".join(m.text if m is not None else "none" for m in meta) + ")"
    return meta.text


def meta_of(t: torch.Tensor) -> Meta:
    return intern_meta(tuple(t.shape), t.dtype, tuple(t.stride()), t.storage_offset())


# Lifted scalars ------------------------------------------------------------------------

class Scalar:
    """A Python number passed as a graph input, so new values never recompile.

    0, 1 and -1 stay constants (torch_xla's "special scalars"); so do bools.
    """

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"Scalar({self.value!r})"


# Nodes ---------------------------------------------------------------------------------

class _NodeMarker:
    __slots__ = ()

    def __repr__(self) -> str:
        return "%"


NODE = _NodeMarker()   # stands for an operand inside a local key


class Node:
    __slots__ = (
        "op",          # the OpOverload (or an "xlanb.*" name for xlanb's own ops)
        "name",        # the ATen overload name, "aten.add.Tensor": the lowering table's key
        "args",        # arguments, operands as Nodes, lifted numbers as Scalars
        "kwargs",      # keyword arguments (None when there are none)
        "operands",    # the Nodes and Scalars in args and kwargs, in order
        "meta",        # output Meta, or a tuple of them (None for an output not computed)
        "local_key",   # (name, constants, keyword constants, meta): see local_key()
        "buffer",      # the device buffer (jax.Array) once computed, else None
        "location",    # (filename, line) of the user's code that recorded it, when tracked
        "scope",       # the nn.Module path that was running ("blocks.0.attn"), when recorded
        "__weakref__",
    )

    def __repr__(self) -> str:
        state = "computed" if self.buffer is not None else "pending"
        return f"<Node {self.name} {self.meta!r} {state}>"

    def release(self, buffer, forget: bool = True) -> None:
        """Stores the computed value and forgets the operands (all but the value with `forget` False:
        debug_nans' probe may run the graph again until its NaN flag is read, runtime/nans.py)."""
        self.buffer = buffer
        if not forget:
            return
        self.args = ()
        self.kwargs = None
        self.operands = ()


def const_key(x):
    """The hashable, exactly comparable form of an argument with operands blanked out."""
    t = type(x)
    if t is Node:
        return NODE
    if t is Scalar:
        return type(x.value)
    if t is tuple or t is list:
        return tuple(const_key(y) for y in x)
    if t is dict:
        return tuple((k, const_key(v)) for k, v in x.items())
    if t is float or t is int or t is bool:
        # 1 == 1.0 == True in Python, but they are different constants to torch
        return (t, "nan") if x != x else (t, x)
    return x


def local_key(name: str, args: tuple, kwargs: dict | None, meta) -> tuple:
    """The one formula for a node's local key; fast paths memoise it per input metas."""
    return (name, const_key(args), const_key(kwargs) if kwargs else None, meta)


def operands_of(args: tuple, kwargs: dict | None) -> tuple:
    """The Nodes and lifted Scalars inside an argument structure (nested lists, kwargs), in order."""
    found: list = []
    _collect(args, found)
    if kwargs:
        _collect(kwargs, found)
    return tuple(found)


def _collect(x, found: list) -> None:
    t = type(x)
    if t is Node or t is Scalar:
        found.append(x)
    elif t is tuple or t is list:
        for y in x:
            _collect(y, found)
    elif t is dict:
        for y in x.values():
            _collect(y, found)


def new_node(op, name: str, args: tuple, kwargs: dict | None, operands: tuple, meta, key: tuple,
             location=None, scope=None) -> Node:
    """The one node constructor, from its arguments alone. Callers pass the operands and local
    key they computed (or memoised) with `operands_of` and `local_key`; `make_node` does both.
    Capture passes the module scope that is running (capture/scopes.py's node constructors)."""
    n = Node()
    n.op, n.name, n.args, n.kwargs, n.operands, n.meta = op, name, args, kwargs, operands, meta
    n.local_key = key
    n.buffer = None
    n.location = location
    n.scope = scope
    return n


def make_node(op, name: str, args: tuple, kwargs: dict | None, meta, location=None, scope=None) -> Node:
    """A pending node for any argument structure."""
    return new_node(op, name, args, kwargs, operands_of(args, kwargs), meta, local_key(name, args, kwargs, meta),
                    location, scope)


def data_node(buffer, meta: Meta) -> Node:
    """A graph input: a device buffer with its metadata."""
    n = new_node("xlanb.device_data", "xlanb.device_data", (), None, (), meta, ("xlanb.device_data", (), None, meta))
    n.buffer = buffer
    return n
