"""The runtime's JAX entry points run outside torch.compile's frame evaluation.

While a torch.compile'd function runs Python between its graphs (a graph break, a value read
such as `if loss > 0:`), dynamo compiles every Python frame that is called, and stops at the
first one it cannot trace: JAX's compiler calls `logging`, and traced JAX code computes wrong
answers. Functions marked `@jax_entry` run with dynamo's frame evaluation off for their whole
call (`torch._dynamo.disable(fn, recursive=True)`) once the `"xlanb"` backend is registered
(`xlanb.dynamo.register` calls `use_disable`); before that they are called directly, and
torch._dynamo stays unimported.
"""

from __future__ import annotations

import functools

_disable: list = []      # [torch._dynamo.disable] once the torch.compile backend is registered


def use_disable(disable) -> None:
    if not _disable:
        _disable.append(disable)


def jax_entry(fn):
    disabled: list = []

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        if not _disable:
            return fn(*args, **kwargs)
        if not disabled:
            disabled.append(_disable[0](fn, recursive=True))
        return disabled[0](*args, **kwargs)
    return entry
