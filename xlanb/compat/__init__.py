"""`xlanb.compat`: torch_xla's module tree served by xlanb, so torch_xla scripts run unchanged.

    import xlanb.compat
    xlanb.compat.install()                  # or: python -m xlanb.compat script.py args...
    import torch_xla.core.xla_model as xm   # now xlanb's (docs/torch_xla.md lists what is covered)

Opt-in and never on by default. `install()` refuses when a real torch_xla is importable (the two
would fight over the "xla" device). It registers the modules of xlanb/compat/torch_xla_tree/ under
torch_xla's names in sys.modules, and makes `torch.compile(backend="openxla")` and
`"openxla_eval"` xlanb's backend. No torch_xla code is used or copied.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys

import torch

TREE = "xlanb.compat.torch_xla_tree"
# torch_xla's module names, in import order (parents first)
MODULES = ("", "_XLAC", "_internal", "_internal.tpu", "core", "core.xla_model", "core.xla_env_vars", "debug",
           "debug.metrics", "debug.profiler", "runtime", "distributed", "distributed.spmd",
           "distributed.spmd.xla_sharding", "distributed.parallel_loader", "distributed.xla_multiprocessing",
           "distributed.xla_backend", "utils", "utils.utils", "experimental",
           "experimental.spmd_fully_sharded_data_parallel", "test", "test.test_utils")
BACKENDS = ("openxla", "openxla_eval")


def is_installed() -> bool:
    module = sys.modules.get("torch_xla")
    return module is not None and module.__name__ == TREE


def _refuse_real_torch_xla() -> None:
    if "torch_xla" in sys.modules:
        raise RuntimeError(f"xlanb.compat.install(): a torch_xla module is already imported "
                           f"({getattr(sys.modules['torch_xla'], '__file__', None)}); the compat layer would shadow it. "
                           "Use torch_xla or xlanb.compat in a process, not both.")
    try:
        spec = importlib.util.find_spec("torch_xla")
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        where = spec.origin or (list(spec.submodule_search_locations or []) or ["?"])[0]
        raise RuntimeError(f"xlanb.compat.install(): the real torch_xla is importable ({where}); xlanb.compat serves "
                           "torch_xla's names only where torch_xla is not installed. Uninstall it "
                           "(pip uninstall torch_xla) or run this program in an environment without it.")


def install() -> None:
    """Serves `import torch_xla...` from xlanb for the rest of the process (idempotent)."""
    if is_installed():
        return
    _refuse_real_torch_xla()
    for name in MODULES:
        module = importlib.import_module(f"{TREE}.{name}" if name else TREE)
        sys.modules[f"torch_xla.{name}" if name else "torch_xla"] = module
    _alias_compile_backends()
    from xlanb.compat import counters
    counters.install()


def uninstall() -> None:
    """Takes torch_xla's names out of sys.modules and restores torch.compile (tests, notebooks).
    Modules that already imported torch_xla keep the objects they hold."""
    for name in [n for n in sys.modules if n == "torch_xla" or n.startswith("torch_xla.")]:
        if sys.modules[name].__name__.startswith(TREE):
            del sys.modules[name]
    from xlanb.compat import counters
    counters.uninstall()
    original = getattr(torch.compile, "_xlanb_compat_original", None)
    if original is not None:
        torch.compile = original


def _register_backends() -> None:
    """The xlanb backend under torch_xla's names (replacing torch's own entries, which import torch_xla)."""
    from torch._dynamo.backends import registry

    from xlanb import dynamo
    backend = dynamo.register()
    registry._lazy_import()
    for name in BACKENDS:
        registry._COMPILER_FNS[name] = backend


def _alias_compile_backends() -> None:
    """`torch.compile(..., backend="openxla")` registers the aliases on first use, so installing the
    compat layer does not import torch._dynamo. (torch's own registry names "openxla" with an entry
    that imports torch_xla, so these names cannot come from an entry point as "xlanb" does.)"""
    original = torch.compile
    if getattr(original, "_xlanb_compat_hooked", False):
        return

    @functools.wraps(original)
    def compile(*args, **kwargs):
        if kwargs.get("backend") in BACKENDS:
            _register_backends()
        return original(*args, **kwargs)
    compile._xlanb_compat_hooked = True
    compile._xlanb_compat_original = original
    torch.compile = compile


__all__ = ["install", "uninstall", "is_installed", "MODULES", "BACKENDS"]
