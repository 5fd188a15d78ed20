"""Keeping shared (tied) parameters shared when a module moves to the xla device.

`nn.Module._apply` keeps a parameter's identity only when the new tensor can be assigned
with `.data =` (torch_xla's tensors can; a Python wrapper tensor cannot), and otherwise
makes one new Parameter per module. A parameter shared by two modules (tied input and
output embeddings) would become two independent parameters. The wrapper below records
which modules share each parameter before the move and restores the sharing after it.
"""

from __future__ import annotations

import threading

import torch.nn as nn

_original_apply = nn.Module._apply
_local = threading.local()


def _apply_keeping_ties(self, fn, recurse=True):
    if not recurse or getattr(_local, "active", False):
        return _original_apply(self, fn, recurse)
    shared: dict[int, list] = {}
    for module in self.modules():
        for key, param in module._parameters.items():
            if param is not None:
                shared.setdefault(id(param), []).append((module, key))
    _local.active = True
    try:
        result = _original_apply(self, fn, recurse)
    finally:
        _local.active = False
    for users in shared.values():
        if len(users) > 1:
            first = users[0][0]._parameters[users[0][1]]
            for module, key in users[1:]:
                if module._parameters[key] is not first:
                    module._parameters[key] = first
    return result


def keep_ties_on_move() -> None:
    if nn.Module._apply is not _apply_keeping_ties:
        nn.Module._apply = _apply_keeping_ties
