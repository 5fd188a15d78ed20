"""What lowering rules do differently per torch release: one place to look when a new torch comes
out. Each flag names the releases it serves and what torch's CPU kernel does there; the rules
give the installed torch's answer, since torch's own backward formulas read these outputs."""

from __future__ import annotations

import torch

from xlanb._requirements import release
from xlanb.ir.precision import matmul_precision

TORCH = release(torch.__version__)[:2]

# torch 2.9 and 2.10: linalg_solve_ex factors A^T, not A, when A is real and contiguous (LAPACK is
# column-major: A^T's factors need no copy), and its LU and pivots outputs are those of A^T; solve's
# backward reads them so (its `use_A_T`). torch >= 2.11 factors A. A non-contiguous real A on 2.9
# and 2.10 is run on the CPU by capture (capture/handlers.py: linalg_solve_ex), the rule cannot see
# strides.
SOLVE_FACTORS_CONTIGUOUS_TRANSPOSE = TORCH < (2, 11)

# torch >= 2.14: softshrink rounds lambd to the input's dtype before comparing and subtracting (a
# bfloat16 0.1 is 0.10010, so softshrink(0.1001, 0.1) is 0); before, it compared in float32
SOFTSHRINK_LAMBDA_IN_INPUT_DTYPE = TORCH >= (2, 14)

# torch 2.9 to 2.13: CPU's clamp takes a negative bound into an unsigned dtype by wrapping it (uint8
# clamp(min=-1) is clamp(min=255): the check of the conversion lets -255..-1 through) and refuses
# other bounds past the range; torch 2.15 takes a bound past the range as no bound on that side (and
# refuses one past the other side). Asked of the installed torch (2.14 was not tried): one small op.
CLAMP_WRAPS_NEGATIVE_INTO_UNSIGNED = torch.ones(1, dtype=torch.uint8).clamp(min=-1).item() == 255


# torch.get_float32_matmul_precision(), read where graphs are built (it is part of their key)
float32_matmul_precision = matmul_precision
