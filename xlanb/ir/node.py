"""The one IR node type, interned tensor metadata, and lifted Python scalars.

A Node is an ATen call with its operands replaced by Nodes. It carries:
  lk   the local key: (op name, constant arguments, output meta); equal local keys
       plus equal operand positions mean equal computations (see graph.py);
  h    an incremental structural hash (local key folded with operand hashes), used to
       compare graphs across compiles and to explain recompiles;
  buf  the device buffer once the node has been computed. A computed node drops its
       operands, so history does not pile up in memory, and becomes a graph input.
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

    def empty(self) -> torch.Tensor:
        """A meta tensor with exactly this layout, for running torch's meta kernels."""
        if self.offset == 0:
            return torch.empty_strided(self.shape, self.strides, dtype=self.dtype, device="meta")
        extent = self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.strides) if d > 0) + 1
        base = torch.empty(extent, dtype=self.dtype, device="meta")
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


LIFT_SPECIAL = [False]   # XLANB_SPECIAL_SCALARS=0 sets this: lift 0/+-1 too


def lift(value):
    """Returns a Scalar for a liftable Python number, else the value itself."""
    t = type(value)
    if t is float or t is int:
        if (value == 0 or value == 1 or value == -1) and not LIFT_SPECIAL[0]:
            return value
        if t is int and not -(2 ** 63) <= value < 2 ** 63:
            return value
        return Scalar(value)
    return value


# Nodes ---------------------------------------------------------------------------------

class _NodeMarker:
    __slots__ = ()

    def __repr__(self) -> str:
        return "%"


NODE = _NodeMarker()   # stands for an operand inside a local key


class Node:
    __slots__ = ("op", "name", "args", "kwargs", "ins", "meta", "lk", "h", "buf", "loc", "__weakref__")

    def __repr__(self) -> str:
        state = "computed" if self.buf is not None else "pending"
        return f"<Node {self.name} {self.meta!r} {state}>"

    @property
    def computed(self) -> bool:
        return self.buf is not None

    def release(self, buf) -> None:
        """Stores the computed value and forgets the operands."""
        self.buf = buf
        self.args = ()
        self.kwargs = None
        self.ins = ()


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


def _collect(x, ins: list) -> None:
    t = type(x)
    if t is Node or t is Scalar:
        ins.append(x)
    elif t is tuple or t is list:
        for y in x:
            _collect(y, ins)
    elif t is dict:
        for y in x.values():
            _collect(y, ins)


def make_node(op, name: str, args: tuple, kwargs: dict | None, meta, loc=None) -> Node:
    """The general constructor: any argument structure (nested lists, kwargs)."""
    ins: list = []
    _collect(args, ins)
    if kwargs:
        _collect(kwargs, ins)
    n = Node()
    n.op, n.name, n.args, n.kwargs, n.meta = op, name, args, kwargs, meta
    n.ins = tuple(ins)
    n.lk = (name, const_key(args), const_key(kwargs) if kwargs else None, meta)
    n.h = hash((n.lk, tuple(i.h for i in ins if type(i) is Node)))
    n.buf = None
    n.loc = loc
    return n


def data_node(buf, meta: Meta) -> Node:
    """A graph input: a device buffer with its metadata."""
    n = Node()
    n.op = n.name = "xlanb.device_data"
    n.args, n.kwargs, n.ins, n.meta = (), None, (), meta
    n.lk = ("xlanb.device_data", (), None, meta)
    n.h = hash(n.lk)
    n.buf = buf
    n.loc = None
    return n
