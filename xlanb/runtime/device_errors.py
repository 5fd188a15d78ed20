"""XLA's report of an error torch raised in a CPU fallback op, turned back into torch's own error.

A fallback op (lower/fallback.py) runs torch inside the program through a host callback. When torch
raises there, XLA reports a `JaxRuntimeError` whose text says 'CpuCallback error' and holds the
Python traceback. The CPU reports it at the launch; an asynchronous device (a TPU, a GPU) at the
first read or wait of the program's outputs, so `executor.call` waits for a program with fallback
ops (`Compiled.host_calls`) to bring it to the launch there too. The callback keeps the last few
(op, error) pairs in `runtime_state().fallback_errors`; every JAX entry point (`outside.jax_entry`)
passes what it raises through `torch_error`, so the user gets torch's type and message wherever
XLA's report comes.
"""

from __future__ import annotations

from xlanb.state import runtime_state


def torch_error(error: BaseException, graph: str | None = None) -> BaseException | None:
    """torch's error when `error` is XLA's report of one a fallback op raised, else None."""
    if type(error).__name__ != "JaxRuntimeError":
        return None
    text = str(error)
    if "CpuCallback error" not in text:
        return None
    for op, cause in reversed(runtime_state().fallback_errors):
        if str(cause) in text:
            fresh = _same_error(cause)
            where = f"graph '{graph}'" if graph else "its graph"
            fresh.add_note(f"xlanb: raised by {op}, which has no lowering and ran on the CPU inside {where} "
                           "when it executed")
            return fresh
    return None


def _same_error(error: Exception) -> Exception:
    """A fresh exception of `error`'s type and message (its traceback is inside XLA's callback)."""
    try:
        return type(error)(*error.args)
    except Exception:     # a type whose constructor wants other arguments
        return RuntimeError(str(error))
