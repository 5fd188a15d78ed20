"""torch's float32 matmul precision, read at every graph build: an ingredient of the graph's
CacheKey (ir/graph.py), so changing it compiles new graphs instead of serving old ones. XLA_PRECISION
is the one mapping to XLA's dot precision; the lowering, the self-check and `%xla_env` all read it."""

from __future__ import annotations

import warnings

import torch

from xlanb._requirements import release

DEFAULT = "highest"       # torch's default: full float32 products, the CPU's numbers
# torch.set_float32_matmul_precision(...) -> the name of the lax.Precision float32 dots get
XLA_PRECISION = {"highest": "HIGHEST", "high": "HIGH", "medium": "DEFAULT"}

# torch 2.9 answers its first read with a UserWarning about its new TF32 settings (once per process,
# from its C++), which a user who never asked would see at their first xla op: read that one quietly
_quiet = release(torch.__version__)[:2] >= (2, 10)


def matmul_precision() -> str:
    """torch.get_float32_matmul_precision(): "highest", "high" or "medium" (a C call, cheap)."""
    global _quiet
    if _quiet:
        return torch.get_float32_matmul_precision()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        now = torch.get_float32_matmul_precision()
    _quiet = True
    return now


def xla_precision(name: str) -> str:
    """The XLA precision float32 dots get under torch's setting `name`, in JAX's words."""
    return XLA_PRECISION.get(name, "HIGHEST")
