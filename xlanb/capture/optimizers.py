"""torch's optimizers take their foreach path on xla tensors, as on torch_xla's.

`torch.optim`'s default (`foreach=None`) runs the foreach implementation on a device whose type
torch lists for foreach kernels (PrivateUse1 is: `_get_foreach_kernels_supported_devices`), but
only for the plain tensor types in `torch.optim.optimizer._foreach_supported_types`; xlanb's
wrapper subclass is not one, so AdamW and SGD fell back to their per-parameter loop: one op per
parameter and update step where the foreach path has one op for all of them. torch_xla's tensors
are plain tensors and take the foreach path. The values are those of torch's foreach implementation,
which can round differently in the last bit from the loop's (every torch.optim optimizer tried was
within 1.2e-7 of CPU's loop after 3 steps: tests/capture/test_optimizers.py).

Measured on W7 (HF GPT-2, AdamW, 2-core CPU, persistent cache off): in eager mode, where each op is
an executable, the first step 5.84 -> 4.72 s (170 -> 112 executables compiled) and the steady step
262 -> 217 ms; a lazy step traces 12 foreach ops in place of ~150 per-parameter ones.
An explicit `foreach=False` keeps the per-parameter loop. On torch 2.9, whose own XLA device type
xlanb takes (capture/torch_versions.py), torch offers the foreach path to no xla tensor: the loop stays.
"""

from __future__ import annotations


def take_foreach_path(tensor_type: type) -> None:
    """Adds `tensor_type` to the types torch's optimizers run their foreach implementation for."""
    from torch.optim import optimizer
    supported = getattr(optimizer, "_foreach_supported_types", None)
    if isinstance(supported, list) and tensor_type not in supported:
        supported.append(tensor_type)
