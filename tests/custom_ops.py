"""An op that xlanb certainly has no lowering for: it must run through the CPU fallback."""

import torch


@torch.library.custom_op("xlanb_test::scale_shift", mutates_args=())
def scale_shift(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x * scale + 1.0


@scale_shift.register_fake
def _(x, scale):
    return torch.empty_like(x)


FALLBACK_COUNTER = "xlanb_test::scale_shift"
