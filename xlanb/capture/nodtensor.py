"""Keeping `torch.distributed.tensor` unimported until DTensor is used (about 0.5-1 s to import:
it pulls in sympy and torch's symbolic shapes).

Since torch 2.10 the C++ half of `__torch_dispatch__` (`dispatch_on_subclass`) asks of every
subclass argument whether it is a DTensor, and its first `is_dtensor` imports
`torch.distributed.tensor` to fetch the class: the first op on an xla tensor (`module.to("xla")`)
paid that import. Before that check it looks up the rule `torch.library.register_torch_dispatch`
may have registered for (op, subclass), through `torch._library.simple_registry
.find_torch_dispatch_rule`, and a rule that answers ends the search. `install()` wraps that lookup:
for LazyTensor it answers with LazyTensor's own `__torch_dispatch__` function (the one C++ would
call next anyway, read at each lookup so a swapped one is used); every other class gets torch's
answer. Rules registered for LazyTensor itself are not consulted (xlanb registers none).

C++ keeps the lookup function it fetched on the first subclass dispatch of the process, so the
wrapper must be in place before that (xlanb's import is); if a subclass was dispatched earlier,
the wrapper is never called and the import happens as before. Private torch API, written against
torch 2.10-2.13; tests/runtime/test_imports.py fails if the import comes back.
"""

from __future__ import annotations

from xlanb.capture.tensor import LazyTensor


def install() -> bool:
    """Wraps torch's dispatch-rule lookup once; False when this torch has none to wrap."""
    try:
        from torch._library import simple_registry
    except ImportError:
        return False
    original = getattr(simple_registry, "find_torch_dispatch_rule", None)
    if original is None or getattr(original, "__wrapped__", None) is not None:
        return False
    lazy_dict = LazyTensor.__dict__

    def find_torch_dispatch_rule(op, torch_dispatch_class):
        if torch_dispatch_class is LazyTensor:
            return lazy_dict["__torch_dispatch__"].__func__
        return original(op, torch_dispatch_class)
    find_torch_dispatch_rule.__wrapped__ = original
    find_torch_dispatch_rule.__doc__ = original.__doc__
    simple_registry.find_torch_dispatch_rule = find_torch_dispatch_rule
    return True
