"""What lowering rules do differently per torch release: one place to look when a new torch comes
out. Each flag names the releases it serves and what torch's CPU kernel does there; the rules
give the installed torch's answer, since torch's own backward formulas read these outputs."""

from __future__ import annotations

import torch

TORCH = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])

# torch 2.9 and 2.10: linalg_solve_ex factors A^T, not A, when A is real and contiguous (LAPACK is
# column-major: A^T's factors need no copy), and its LU and pivots outputs are those of A^T; solve's
# backward reads them so (its `use_A_T`). torch >= 2.11 factors A. A non-contiguous real A on 2.9
# and 2.10 is run on the CPU by capture (capture/handlers.py: linalg_solve_ex), the rule cannot see
# strides.
SOLVE_FACTORS_CONTIGUOUS_TRANSPOSE = TORCH < (2, 11)
