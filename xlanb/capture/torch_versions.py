"""What the capture layer does differently per torch release: one place to look when a new torch
comes out. Each branch names the releases it serves.

The device. xlanb's tensors are wrapper tensors whose ops arrive in Python
(`__torch_dispatch__`); torch still needs two things from a device before it will move a tensor
there or run a backward on it: a dispatch key for the factory functions, and a device guard (a
C++ object that sets and reads the current device; ours has one device and nothing to set).

- torch >= 2.10: PrivateUse1 renamed to the device name ("xla"), kernels on the PrivateUse1
  key, and torch's Python device guard (`torch._C._acc`).
- torch 2.9: "xla" is torch's own XLA device type (the one torch_xla's C++ backend fills in)
  and torch parses the name to it before it looks at PrivateUse1's name; there is no Python
  device guard either. xlanb takes torch's own device type instead: kernels on the XLA key and,
  as the guard, torch's own no-op guard (the one the meta device uses, `NoOpDeviceGuardImpl`)
  stored in torch's guard registry for the XLA type, as a C++ backend's static registrar would.
  Another `XLANB_DEVICE_NAME` is refused on 2.9: a renamed PrivateUse1 there needs C++ hooks.
"""

from __future__ import annotations

import ctypes
import os

import torch

from xlanb._requirements import release

TORCH = release(torch.__version__)[:2]

# References torch's C++ holds to the Python object of a tensor it keeps (a parameter's .grad):
# torch >= 2.10 keeps one strong reference; 2.9 none (sys.getrefcount counts only Python's)
CPP_REFS = 1 if TORCH >= (2, 10) else 0

# c10::DeviceType's values (c10/core/DeviceType.h, unchanged since torch 2.1)
_DEVICE_TYPE = {"XLA": 9, "Meta": 14, "PrivateUse1": 20}
_DEVICE_TYPES = 21      # COMPILE_TIME_MAX_DEVICE_TYPES


def backend_key(name: str) -> str:
    """The dispatch key xlanb's factory kernels go on, for the device called `name`."""
    if TORCH < (2, 10) and name == "xla":
        return "XLA"                      # torch 2.9: torch's own XLA device type
    return "PrivateUse1"


# ATen kernels torch registers for every backend but XLA (torch_xla brings its own): on torch 2.9's
# XLA key xlanb gives them, run as on the meta device (they change a tensor's sizes and strides,
# never its values: an in-place view op with Python dispatch off, capture.handlers)
_XLA_KEY_GAPS = ("as_strided_",)


def fill_backend_gaps(lib, backend: str) -> None:
    if backend != "XLA":
        return
    meta = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
    for name in _XLA_KEY_GAPS:
        op = getattr(torch.ops.aten, name).default
        lib.impl(name, lambda *args, _op=op, **kwargs: _op.redispatch(meta, *args, **kwargs), backend)


def name_backend(name: str) -> None:
    """Makes `name` parse to the backend key `backend_key(name)` serves."""
    if backend_key(name) == "PrivateUse1":
        torch.utils.rename_privateuse1_backend(name)


def register_seeding(name: str, module) -> None:
    """`torch.manual_seed(s)` seeds xlanb's device too: torch seeds the module registered under
    PrivateUse1's name (torch.random._seed_custom_device). torch 2.9's "xla" is not PrivateUse1, so
    the module is registered under PrivateUse1's unrenamed name as well."""
    if backend_key(name) == "XLA" and torch._C._get_privateuse1_backend_name() == "privateuseone" \
            and not hasattr(torch, "privateuseone"):
        torch._register_device_module("privateuseone", module)


def register_device_guard(name: str) -> None:
    """A no-op device guard for the device type `name` parses to."""
    key = backend_key(name)
    if hasattr(torch._C, "_acc"):                              # torch >= 2.10
        from torch.utils import backend_registration
        torch._C._acc.register_python_privateuseone_hook(backend_registration._DummyPrivateUse1Hook())
        torch._C._acc.register_python_privateuseone_device_guard(backend_registration._DummyDeviceGuard())
        return
    if key == "PrivateUse1":
        raise ImportError(f"on torch {torch.__version__} xlanb's device can only be called 'xla' (torch 2.9 has "
                          f"no Python hooks for a renamed PrivateUse1 device, '{name}'): unset XLANB_DEVICE_NAME, "
                          "or use torch >= 2.10: pip install 'torch>=2.10'")
    _share_meta_guard(_DEVICE_TYPE[key])                       # torch 2.9


# torch 2.9's c10::impl::DeviceGuardImplInterface (c10/core/impl/DeviceGuardImplInterface.h): the
# virtual functions in declaration order, i.e. their vtable slots (Itanium C++ ABI). A released
# torch's ABI never changes, so this table is right for 2.9 for good.
_SLOTS_2_9 = ("type", "exchangeDevice", "getDevice", "setDevice", "uncheckedSetDevice", "getStream",
              "getDefaultStream", "getStreamFromGlobalPool", "getNewStream", "exchangeStream", "destroyEvent",
              "record", "block", "queryEvent", "deviceCount", "queryStream", "synchronizeStream",
              "synchronizeEvent", "synchronizeDevice", "recordDataPtrOnStream", "elapsedTime",
              "~complete", "~deleting")
# c10::Device is {DeviceType type; DeviceIndex index}, two int8s, passed and returned in a register
_TYPE_FN = ctypes.CFUNCTYPE(ctypes.c_int8, ctypes.c_void_p)
_GET_FN = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_void_p)
_EXCHANGE_FN = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_void_p, ctypes.c_uint16)
_kept: list = []        # the guard object, its vtable and callbacks: they must outlive every C++ caller


def _share_meta_guard(device_type: int) -> None:
    """torch 2.9: registers a device guard for `device_type` in torch's guard registry
    (c10::impl::device_guard_impl_registry, the array of pointers that a C++ backend's static
    registrar writes). The guard is torch's own no-op guard of the meta device (no streams, no
    events, one device) with three entries of its vtable replaced: its type is `device_type`, and
    its current device is index 0 of that type (the meta guard answers index -1, which the
    autograd engine's per-device queues refuse). It lives as long as the process."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
    try:
        registry = ctypes.c_void_p.in_dll(lib, "_ZN3c104impl26device_guard_impl_registryE")
    except ValueError as e:
        raise ImportError(f"xlanb cannot find torch {torch.__version__}'s device guard registry ({e}); "
                          "use torch >= 2.10: pip install 'torch>=2.10'") from None
    slots = (ctypes.c_void_p * _DEVICE_TYPES).from_address(ctypes.addressof(registry))
    meta = slots[_DEVICE_TYPE["Meta"]]
    if not meta:
        raise ImportError(f"torch {torch.__version__} has no meta device guard to start from; "
                          "use torch >= 2.10: pip install 'torch>=2.10'")
    if slots[device_type]:
        raise ImportError("another library (torch_xla?) already registered a device guard for this device type; "
                          "use one of them per process, or set XLANB_DEVICE_NAME to another name")
    # the meta guard's vtable: offset-to-top and type info, then one slot per virtual function
    meta_vtable = ctypes.c_void_p.from_address(meta).value - 2 * ctypes.sizeof(ctypes.c_void_p)
    vtable = (ctypes.c_void_p * (2 + len(_SLOTS_2_9)))()
    ctypes.memmove(vtable, meta_vtable, ctypes.sizeof(vtable))
    device0 = device_type & 0xFF          # Device(device_type, index 0), as two bytes
    callbacks = (_TYPE_FN(lambda this: device_type), _EXCHANGE_FN(lambda this, device: device0),
                 _GET_FN(lambda this: device0))
    for name, fn in zip(("type", "exchangeDevice", "getDevice"), callbacks):
        vtable[2 + _SLOTS_2_9.index(name)] = ctypes.cast(fn, ctypes.c_void_p).value
    guard = ctypes.c_void_p(ctypes.addressof(vtable) + 2 * ctypes.sizeof(ctypes.c_void_p))   # the object: its vptr
    _kept.append((guard, vtable, callbacks))
    slots[device_type] = ctypes.addressof(guard)


# The cyclic garbage collector and a tensor that autograd still holds. torch 2.9 keeps the Python
# object of a tensor it holds in C++ alive by resurrection: when its last Python reference goes, the
# C++ tensor takes the object over (torch >= 2.10 holds a strong reference instead: CPP_REFS). If a
# collection found the object in a garbage cycle, breaking the cycle resurrects it, and the
# collection then calls its tp_clear anyway: torch 2.9's clear for subclasses sees an object that C++
# owns, takes it for one being deallocated, and empties its slots and __dict__. The backward then
# unpacks a LazyTensor without its state ("'LazyTensor' object has no attribute '_node'"; a plain
# CPU subclass loses its slots the same way). On torch 2.9 LazyTensor's tp_clear is a C function of
# the same signature that only reads the object (PyObject_GC_IsTracked), so a collection leaves
# LazyTensors alone: a garbage cycle through one is broken at its other members (its __dict__, the
# Storage and Node objects its slots hold, a hook's function), and its dealloc frees the rest.

class _TypeHead(ctypes.Structure):
    """CPython's PyTypeObject (Include/cpython/object.h, 3.8 to 3.13) up to tp_clear."""
    _fields_ = ([("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p), ("ob_size", ctypes.c_ssize_t),
                 ("tp_name", ctypes.c_char_p), ("tp_basicsize", ctypes.c_ssize_t), ("tp_itemsize", ctypes.c_ssize_t),
                 ("tp_dealloc", ctypes.c_void_p), ("tp_vectorcall_offset", ctypes.c_ssize_t)]
                + [(f"tp_{name}", ctypes.c_void_p) for name in (
                    "getattr", "setattr", "as_async", "repr", "as_number", "as_sequence", "as_mapping", "hash", "call",
                    "str", "getattro", "setattro", "as_buffer")]
                + [("tp_flags", ctypes.c_ulong), ("tp_doc", ctypes.c_char_p), ("tp_traverse", ctypes.c_void_p),
                   ("tp_clear", ctypes.c_void_p)])


def keep_state_through_gc(cls: type) -> bool:
    """torch 2.9: a collection no longer clears `cls`'s objects (above); True when it changed `cls`.
    Nothing is written where the type object does not read back as Python describes it (another
    interpreter build)."""
    if CPP_REFS:
        return False
    head = _TypeHead.from_address(id(cls))
    if (head.tp_basicsize, head.tp_itemsize, head.tp_flags, head.ob_type) != \
            (cls.__basicsize__, cls.__itemsize__, cls.__flags__, id(type(cls))) or not head.tp_clear:
        return False
    head.tp_clear = ctypes.cast(ctypes.pythonapi.PyObject_GC_IsTracked, ctypes.c_void_p).value
    return True
