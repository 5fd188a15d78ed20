"""The torch.UntypedStorage of an xla tensor, and what copy, pickle, torch.save and torch.load do with it.

An xla storage's data_ptr() is a fake address (capture.tensor). torch's storage methods that
allocate on the storage's device (`clone`, so `copy.copy` and `copy.deepcopy`; `new`: xlanb's
device has no C++ allocator) or read through the pointer (`_byteswap`, `_set_from_file`) would kill
the process. Each storage object xlanb makes carries its own versions of them as instance
attributes, which Python finds before the class's methods, and holds its Storage cell (through a
Source): it keeps its value alive once its tensors are gone, as a CPU storage keeps its bytes.

torch.save (and pickle, which saves a storage with torch.save) writes an xla storage's CPU copy
tagged "cpu", so the file loads anywhere, as LazyTensor.__reduce_ex__ stores a tensor's CPU copy.
torch.load(..., map_location="xla") gives xla storages back: each keeps the loaded host bytes and
uploads them when a tensor first views it (set_), in that tensor's dtype, so a loaded tensor is a
plain xla tensor, not a dtype view of bytes.

torch.UntypedStorage(n, device="xla") (and TypedStorage, which makes one) would ask the device's C++
allocator for the bytes, and there is none: the constructor makes the storage on the CPU, with
torch's own argument rules, and moves it (guard_constructor).

One code path for every torch release: torch 2.9's storage.py knows neither the XLA device type
nor "xla" (its share_memory_ would take the CPU path, torch.save would find no location tag), and
the instance methods and the registered tag answer for it.
"""

from __future__ import annotations

import functools
import weakref

import torch

from xlanb.capture import tensor as _tensor
from xlanb.capture.tensor import (Storage, bind_address, new_view, reserve_address, storage_address, storage_at,
                                  storage_nbytes)
from xlanb.capture.nodes import make_node
from xlanb.ir.node import data_node, intern_meta
from xlanb.runtime.transfer import upload

_ZEROS = torch.ops.aten.zeros.default


class Source:
    """What an xla storage object reads: its Storage cell, or (a storage torch.load made that no
    tensor viewed yet) the host bytes torch.load gave it. The storage object holds it, and its
    methods hold it rather than the object: no reference cycle, so a storage (its cell, its device
    buffer) goes when its last reference does, not at a garbage collection."""

    __slots__ = ("storage", "host", "address", "unfilled")

    def __init__(self, storage: Storage | None, host: torch.UntypedStorage | None, address: int):
        self.storage, self.host, self.address = storage, host, address
        self.unfilled = False           # viewed before torch.load's legacy format read its bytes


def untyped_of(storage: Storage, device: torch.device) -> torch.UntypedStorage:
    """The torch.UntypedStorage of an xla Storage cell (LazyTensor.untyped_storage())."""
    return _untyped(Source(storage, None, storage_address(storage)), device)


_tensor.untyped_of = untyped_of


def loaded_storage(host: torch.UntypedStorage, device: torch.device) -> torch.UntypedStorage:
    """An xla storage holding `host`'s bytes (torch.load), uploaded when a tensor first views it."""
    return _untyped(Source(None, host, reserve_address(host.nbytes())), device)


def _untyped(source: Source, device) -> torch.UntypedStorage:
    nbytes = source.host.nbytes() if source.host is not None else storage_nbytes(source.storage)
    untyped = torch._C._construct_storage_from_data_pointer(source.address, device, nbytes)
    methods = untyped.__dict__          # the methods that would allocate on the device or read the address
    methods["_xlanb_source"] = source
    methods["clone"] = functools.partial(_clone, source, device)
    methods["new"] = functools.partial(_new, device)
    methods["tolist"] = functools.partial(_tolist, source, device)
    methods["share_memory_"] = functools.partial(_share_memory_, weakref.ref(untyped), source, device)
    methods["resize_"] = _refuse_resize
    methods["_byteswap"] = functools.partial(_byteswap, source)
    methods["_write_file"] = functools.partial(_write_file, source, device)
    methods["_set_from_file"] = functools.partial(_set_from_file, source)
    return untyped


def storage_for(untyped: torch.UntypedStorage, dtype: torch.dtype) -> Storage | None:
    """The Storage cell of an xla storage object (set_(storage)); a loaded one gets its cell now,
    its bytes uploaded as `dtype`. None for a storage xlanb did not make."""
    storage = storage_at(untyped.data_ptr())
    if storage is not None:
        return storage
    source = getattr(untyped, "__dict__", {}).get("_xlanb_source")
    return None if source is None else _cell(source, dtype, untyped)


def _cell(source: Source, dtype: torch.dtype, untyped=None) -> Storage:
    if source.storage is not None:
        return source.storage
    host, source.host = source.host, None
    if host.nbytes() % dtype.itemsize:
        dtype = torch.uint8
    meta = intern_meta((host.nbytes() // dtype.itemsize,), dtype)
    if getattr(host, "_torch_load_uninitialized", False):
        # torch.load's legacy format views a storage before it reads the bytes (_set_from_file): zeros until then
        storage = Storage(make_node(_ZEROS, "aten.zeros.default", (meta.shape,), {"dtype": dtype}, meta))
        source.unfilled = True
    else:
        storage = Storage(data_node(upload(torch.empty(0, dtype=dtype, device="cpu").set_(host)), meta))
    bind_address(storage, source.address)
    if untyped is not None:
        storage.untyped = weakref.ref(untyped)
    source.storage = storage
    return storage


def _clone(source: Source, device) -> torch.UntypedStorage:
    """An xla storage holding a copy of the bytes (as torch's clone does on cuda)."""
    if source.host is not None:
        return loaded_storage(source.host.clone(), device)
    with torch.no_grad():
        copy = new_view(source.storage, (), source.storage.node.meta).clone()
    return copy.untyped_storage()


def _new(device) -> torch.UntypedStorage:
    return torch.empty(0, dtype=torch.uint8, device=device).untyped_storage()


def _host_bytes(source: Source, device) -> torch.UntypedStorage:
    """The bytes on the CPU, in the storage's memory order (read as torch reads a storage: set_)."""
    if source.host is not None:
        return source.host
    plain = torch._C._construct_storage_from_data_pointer(source.address, device, storage_nbytes(source.storage))
    return torch.UntypedStorage.cpu(plain)


def _tolist(source: Source, device) -> list:
    """The bytes, from one CPU copy (torch reads a storage element by element)."""
    return _host_bytes(source, device).tolist()


def _share_memory_(ref, source: Source, device) -> torch.UntypedStorage:
    """As on cuda, a no-op returning the storage (only CPU storages use shared memory); an object
    for the same storage if nothing else held it (`t.untyped_storage().share_memory_()`)."""
    untyped = ref()
    return untyped if untyped is not None else _untyped(source, device)


def _refuse_resize(size):
    raise RuntimeError(f"an xla storage cannot be resized (resize_({size})): its bytes are a device buffer of fixed "
                       "size. Make a tensor of the size you need instead, e.g. torch.empty(n, device='xla')")


def _byteswap(source: Source, element_size: int):
    if source.host is None:
        raise RuntimeError("byteswap() of an xla storage is not supported: swap the bytes of a CPU copy "
                           "(storage.cpu().byteswap(dtype)), or of the tensor on the CPU")
    source.host._byteswap(element_size)


def _write_file(source: Source, device, f, is_real_file, save_size, element_size):
    """torch.save's legacy format (pickle of a storage): the bytes of a CPU copy."""
    return _host_bytes(source, device)._write_file(f, is_real_file, save_size, element_size)


def _set_from_file(source: Source, f, offset, is_real_file, element_size):
    """torch.load's legacy format fills a storage after restoring its location: a loaded xla
    storage reads into its host bytes (or, once a tensor viewed it, its value becomes them)."""
    if source.host is not None:
        source.host._set_from_file(f, offset, is_real_file, element_size)
        source.host.__dict__.pop("_torch_load_uninitialized", None)      # torch leaves it set
        return
    if not source.unfilled:
        raise RuntimeError("reading a file into an xla storage is not supported: load it on the CPU "
                           "(torch.load(f, map_location='cpu')) and move the tensors with .to('xla')")
    source.unfilled = False
    storage = source.storage
    values = torch.empty(storage.node.meta.shape, dtype=storage.node.meta.dtype, device="cpu")
    values.untyped_storage()._set_from_file(f, offset, is_real_file, element_size)
    storage.node = data_node(upload(values), storage.node.meta)
    storage.version += 1


def _tag(name: str, storage) -> str | None:
    """torch.save's location tag: "cpu", for the CPU copy it writes of an xla storage."""
    if storage.device.type == name:
        return "cpu"
    return None


def _restore(name: str, host, location: str):
    """torch.load's location map: storages for `name` (map_location="xla") become xla storages."""
    if location != name and not location.startswith(name + ":"):
        return None
    device = torch.device(location)
    if device.index not in (None, 0):
        raise RuntimeError(f"Attempting to deserialize object on {location}, but xlanb drives one device, "
                           f"'{name}:0': use torch.load with map_location='{name}'")
    return loaded_storage(host, torch.device(name, 0))


def register_serialization(name: str) -> None:
    """Before torch's own entries for cuda (20) and PrivateUse1 (23), after the CPU's (10)."""
    torch.serialization.register_package(15, functools.partial(_tag, name), functools.partial(_restore, name))
    guard_constructor(name)


_construct = torch._C.StorageBase.__new__


def guard_constructor(name: str) -> None:
    """torch.UntypedStorage(..., device=name): made on the CPU (its checks, its errors) and moved."""
    def new(cls, *args, device=None, **kwargs):
        if device is None or torch.device(device).type != name:
            return _construct(cls, *args, **kwargs) if device is None else _construct(cls, *args, device=device,
                                                                                        **kwargs)
        target = torch.device(device)
        if target.index not in (None, 0):
            raise RuntimeError(f"xlanb drives one device, '{name}:0': make the storage with device='{name}'")
        host = _construct(cls, *args, **kwargs)
        with torch.no_grad():
            return torch.empty(0, dtype=torch.uint8).set_(host).to(target).untyped_storage()
    torch.UntypedStorage.__new__ = new
