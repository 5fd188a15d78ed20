"""The private torch hooks the `"xlanb"` torch.compile backend needs, and nothing else.

Tested on torch 2.9 to 2.15 (`TESTED_TORCH`). Both hooks reach into dynamo's internals:

1. dynamo builds a variable for each value it meets from `VariableBuilder._type_dispatch_impl`,
   a cached table {type: builder}. A `LazyTensor` (a wrapper subclass with its own
   `__torch_dispatch__`) is not in it, so dynamo would treat it as an opaque object and trace
   xlanb's own Python. Registering `LazyTensor -> VariableBuilder.wrap_tensor` makes dynamo see
   it as a dense tensor on `xla:0`: it fakeifies it, never runs xlanb's dispatch while tracing,
   and hands the real tensors to the backend.
2. dynamo compiles every Python frame it meets while a compiled function runs Python between its
   graphs (at a graph break), xlanb's own and JAX's included: a value read inside a compiled
   function lowers and runs a graph there. `trace_rules.add` puts xlanb and the JAX packages it
   calls on dynamo's skip list (numpy is on it already), so they always run as plain Python.
3. dynamo sets `capturable=True` on an optimizer's param groups (state on the device: no CPU
   step counter to upload and write back each step) only when every parameter is on CUDA or XPU
   (`OptimizerVariable._set_capturable`). The wrapper below treats xla parameters the same way,
   and makes a float learning rate a 0-d xla tensor (`make_lr`): dynamo specialises a graph on
   every Python float it reads, so an LR scheduler's new float each step would capture the
   optimizer step again; a tensor learning rate is a graph input, and torch's LR schedulers
   update it in place (`fill_`).

`check()` says what is missing on another torch, in words; `install()` raises
`DynamoHookMissing` then, before anything is registered (tests/dynamo/test_hooks.py fails
loudly if a torch upgrade breaks one of the hooks).
"""

from __future__ import annotations

TESTED_TORCH = ("2.9", "2.10", "2.11", "2.12", "2.13", "2.14", "2.15")


class DynamoHookMissing(RuntimeError):
    """This torch lacks the private dynamo hook xlanb's torch.compile backend needs."""


def _torch_version() -> str:
    import torch
    return torch.__version__.split("+")[0]


def check() -> list[str]:
    """What this torch lacks (empty: both hooks are there)."""
    missing = []
    try:
        from torch._dynamo.variables.builder import VariableBuilder
    except ImportError as e:
        return [f"torch._dynamo.variables.builder.VariableBuilder ({e})"]
    impl = getattr(VariableBuilder, "_type_dispatch_impl", None)
    table = None
    if impl is not None:
        try:
            table = impl(False)
        except Exception as e:     # a changed signature
            missing.append(f"VariableBuilder._type_dispatch_impl(trace_numpy) ({type(e).__name__}: {e})")
    if impl is not None and table is not None and not isinstance(table, dict):
        missing.append("VariableBuilder._type_dispatch_impl(...) returning a dict")
    elif impl is None:
        missing.append("VariableBuilder._type_dispatch_impl")
    if not callable(getattr(VariableBuilder, "wrap_tensor", None)):
        missing.append("VariableBuilder.wrap_tensor")
    try:
        from torch._dynamo import trace_rules
        if not callable(getattr(trace_rules, "add", None)):
            missing.append("torch._dynamo.trace_rules.add")
    except ImportError as e:
        missing.append(f"torch._dynamo.trace_rules ({e})")
    try:
        from torch._dynamo.variables.optimizer import OptimizerVariable
        if not callable(getattr(OptimizerVariable, "_set_capturable", None)):
            missing.append("OptimizerVariable._set_capturable")
    except ImportError as e:
        missing.append(f"torch._dynamo.variables.optimizer.OptimizerVariable ({e})")
    return missing


def missing_message(missing: list[str]) -> str:
    return (f"torch.compile(backend=\"xlanb\") needs private dynamo API that torch {_torch_version()} does not "
            f"have: {', '.join(missing)}. xlanb's backend is tested on torch {', '.join(TESTED_TORCH)}. Use one "
            "of those, or run the step lazily (without torch.compile) or with xlanb.compile, which need no "
            "dynamo.")


_installed = [False]


def install(lazy_tensor_type, is_xla, make_lr, packages: tuple[str, ...]) -> None:
    """Registers the xla tensor type with dynamo and lets compiled optimizers keep their state on
    the xla device. Idempotent; raises DynamoHookMissing (nothing changed) on an unknown torch."""
    if _installed[0]:
        return
    missing = check()
    if missing:
        raise DynamoHookMissing(missing_message(missing))
    from torch._dynamo import trace_rules
    from torch._dynamo.variables.builder import VariableBuilder
    from torch._dynamo.variables.optimizer import OptimizerVariable
    from importlib.util import find_spec
    for package in packages:
        if find_spec(package) is not None:
            trace_rules.add(package)
    for trace_numpy in (False, True):
        VariableBuilder._type_dispatch_impl(trace_numpy)[lazy_tensor_type] = VariableBuilder.wrap_tensor
    original = OptimizerVariable._set_capturable

    def _set_capturable(self, tx):
        for group in self.value.param_groups:
            params = group.get("params", [])
            if "capturable" not in group or not params or not all(is_xla(p) for p in params):
                continue
            if all(p not in self.value.state for p in params):
                group["capturable"] = True
            if group["capturable"] and type(group.get("lr")) is float:
                group["lr"] = make_lr(group["lr"])
        return original(self, tx)
    _set_capturable.__wrapped__ = original
    OptimizerVariable._set_capturable = _set_capturable
    _installed[0] = True


def trace_module_scopes(let_dynamo_trace) -> None:
    """Module scopes' `nn.Module.__call__` wrapper, seen by dynamo while it traces a module call,
    becomes one that calls straight through when dynamo traces it. xlanb's files are on dynamo's skip
    list, so the wrapper's code is marked as coming from outside them (a `co_filename` of
    its own): dynamo inlines it, where `torch._dynamo.dont_skip_tracing` would cost a config
    patch (about 6 us) on every module call outside dynamo too."""
    import types

    def traceable(fn):
        code = fn.__code__.replace(co_filename=f"<xlanb {fn.__module__}.{fn.__name__}>")
        return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    let_dynamo_trace(traceable)


# What dynamo reports, read where it puts it (optional: on a torch where these moved, the
# compiled code still runs; only the DynamoBreak events are missing) ------------------------

def listen(break_handler, after_compile) -> bool:
    """Attaches `break_handler` to dynamo's graph-break logger (enabled, not propagated, unless
    the user enabled it already) and `after_compile` to dynamo's end-of-compile callbacks."""
    try:
        import torch._logging
        from torch._dynamo.callback import callback_handler
        log = torch._logging.getArtifactLogger("torch._dynamo.symbolic_convert", "graph_breaks")
    except Exception:
        return False
    if not log.isEnabledFor(10):        # logging.DEBUG: the user has not asked torch for them
        log.setLevel(10)
        log.propagate = False
    log.addHandler(break_handler)
    callback_handler.register_end_callback(after_compile)
    return True


def guard_failures() -> dict:
    """dynamo's {code object: [guard failure texts]} (empty where this torch has none)."""
    try:
        from torch._dynamo.utils import guard_failures as failures
    except ImportError:
        return {}
    return failures
