"""The runtime's JAX entry points run outside torch.compile's frame evaluation.

While a torch.compile'd function runs Python between its graphs (a graph break, a value read
such as `if loss > 0:`), dynamo compiles every Python frame that is called, and stops at the
first one it cannot trace: JAX's compiler calls `logging`, and traced JAX code computes wrong
answers. Functions marked `@jax_entry` run with dynamo's frame evaluation off for their whole
call (`torch._dynamo.disable(fn, recursive=True)`) once the `"xlanb"` backend is registered
(`xlanb.dynamo.register` calls `use_disable`); before that they are called directly, and
torch._dynamo stays unimported.

They are also where XLA's report of an error torch raised in a CPU fallback op becomes torch's own
error again (runtime/device_errors.py), wherever the device reports it: launch, read or wait.
"""

from __future__ import annotations

import functools

from xlanb.runtime import device_errors

_disable: list = []      # [torch._dynamo.disable] once the torch.compile backend is registered


def use_disable(disable) -> None:
    if not _disable:
        _disable.append(disable)


def jax_entry(fn):
    disabled: list = []

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        try:
            if not _disable:
                return fn(*args, **kwargs)
            if not disabled:
                disabled.append(_disable[0](fn, recursive=True))
            return disabled[0](*args, **kwargs)
        except Exception as error:
            fallback = device_errors.torch_error(error)      # an asynchronous device reports it at a read
            if fallback is None:
                raise
            raise fallback from None
    return entry
