"""How an xla result is compared with torch CPU's: tolerances per dtype (widened by the
OpInfo's own toleranceOverride and tests/ops/skips.py), output by output; indices of ties
checked by gathering; float32 results judged against torch's float64 answer when they miss."""

from __future__ import annotations

import torch

from skips import TOLERANCE


def full_name(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


# Tolerances (atol, rtol) per dtype. torch.testing's defaults are made for comparing two
# runs of the same kernel; a different compiler (XLA's vectorised exp/log/tanh, another
# summation order) differs by a few ulp more. torch's own cross-device test
# (test_ops.TestCommon.test_compare_cpu) uses atol=rtol=1e-3; we are stricter for float32
# and keep torch's defaults for the half types. An OpInfo's own toleranceOverride for
# TestCommon tests widens these (see `tolerances`). Integers and bool are exact.
BASE_TOLERANCE = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (1e-5, 1.6e-2),
    torch.float16: (1e-5, 1e-3),
    torch.complex64: (1e-5, 1e-5),
}
# Gradients go through more arithmetic (and XLA fuses it differently): 10x the forward.
GRAD_FACTOR = 10.0
_OVERRIDE_TESTS = {
    ("TestCommon", "test_compare_cpu"), ("TestCommon", "test_noncontiguous_samples"),
    ("TestCommon", "test_variant_consistency_eager"), ("TestCommon", "test_out"),
    ("TestCommon", None), (None, None),
}


# Comparing ----------------------------------------------------------------------------------

def tolerances(op, dtype, direction="fwd") -> tuple[float, float]:
    if dtype in (torch.int64, torch.bool) or not (dtype.is_floating_point or dtype.is_complex):
        return 0.0, 0.0
    atol, rtol = BASE_TOLERANCE.get(dtype, (1e-5, 1e-5))
    for info in getattr(op, "decorators", ()) or ():
        if (getattr(info, "cls_name", None), getattr(info, "test_name", None)) not in _OVERRIDE_TESTS \
                and getattr(info, "cls_name", None) != "TestCommon":
            continue
        if getattr(info, "device_type", None) not in (None, "cpu"):
            continue
        if not getattr(info, "active_if", True):
            continue
        for dec in getattr(info, "decorators", ()):
            d = getattr(dec, "d", None)
            if isinstance(d, dict) and dtype in d:
                atol, rtol = max(atol, d[dtype].atol), max(rtol, d[dtype].rtol)
    wider = TOLERANCE.get((full_name(op), str(dtype).replace("torch.", "")))
    if wider is not None:
        atol, rtol = max(atol, wider[0]), max(rtol, wider[1])
    if direction == "bwd":
        atol, rtol = atol * GRAD_FACTOR, rtol * GRAD_FACTOR
    return atol, rtol


def leaves(x, out: list) -> list:
    if isinstance(x, (list, tuple)):
        for y in x:
            leaves(y, out)
    elif isinstance(x, dict):
        for k in sorted(x):
            leaves(x[k], out)
    else:
        out.append(x)
    return out


def _leaf_dtype(x):
    if isinstance(x, torch.Tensor):
        return x.dtype
    if isinstance(x, bool):
        return torch.bool
    if isinstance(x, int):
        return torch.int64
    if isinstance(x, float):
        return torch.float32      # a Python float computed on xla in float32 (.item())
    if isinstance(x, complex):
        return torch.complex64
    return None


def compare(op, actual, expected, direction="fwd", metadata_only=False) -> None:
    """assert_close output by output, each with the tolerance of its own (expected) dtype."""
    a, e = leaves(actual, []), leaves(expected, [])
    if len(a) != len(e):
        raise AssertionError(f"{len(a)} outputs, expected {len(e)}")
    for i, (x, y) in enumerate(zip(a, e)):
        where = f" (output {i})" if len(a) > 1 else ""
        if metadata_only and isinstance(y, torch.Tensor):
            if not isinstance(x, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                got = f"{x.dtype}{list(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
                raise AssertionError(f"got {got}, expected {y.dtype}{list(y.shape)}{where}")
            continue
        if x is None or y is None:
            if x is not y:
                raise AssertionError(f"got {type(x).__name__}, expected {type(y).__name__}{where}")
            continue
        dtype = _leaf_dtype(y)
        if dtype is None:
            if x != y:
                raise AssertionError(f"got {x!r}, expected {y!r}{where}")
            continue
        atol, rtol = tolerances(op, dtype, direction)
        try:
            torch.testing.assert_close(x, y, atol=atol, rtol=rtol, equal_nan=True, check_device=False,
                                       check_stride=False, check_layout=False)
        except AssertionError as err:
            raise AssertionError(f"{err}{where}") from None


def _arg(sample, position: int, name: str, default):
    """The sample's argument `name` of the Python signature (position counts after input)."""
    if len(sample.args) > position:
        return sample.args[position]
    return sample.kwargs.get(name, default)


def _tie_spec(name: str, sample):
    """(dim, keepdim, values output or None, stable): where ops with ties may pick any index."""
    if name in ("sort", "argsort"):
        stable = bool(sample.kwargs.get("stable", False))
        return _arg(sample, 0, "dim", -1), True, (0 if name == "sort" else None), stable
    if name == "topk":
        return _arg(sample, 1, "dim", -1), True, 0, False
    if name == "kthvalue":
        return _arg(sample, 1, "dim", -1), _arg(sample, 2, "keepdim", False), 0, False
    if name in ("mode", "median", "nanmedian"):
        return _arg(sample, 0, "dim", -1), _arg(sample, 1, "keepdim", False), 0, False
    raise KeyError(name)


def compare_ties(op, sample, actual, expected) -> None:
    """Indices of equal elements are implementation-defined (torch's docs say so for sort,
    topk, kthvalue, mode, median): the values must match, and the returned indices must
    point at those values in the input."""
    dim, keepdim, vpos, stable = _tie_spec(op.name, sample)
    if stable or (op.name in ("median", "nanmedian") and not (sample.args or "dim" in sample.kwargs)):
        compare(op, actual, expected)
        return
    inp = sample.input.detach()
    if inp.dim() == 0:
        inp, dim = inp.reshape(1), 0
    if vpos is None:       # argsort: the values the indices select must be the sorted values
        compare(op, inp.take_along_dim(actual, dim), inp.take_along_dim(expected, dim))
        return
    compare(op, actual[vpos], expected[vpos])
    idx = actual[1 - vpos]
    if sample.input.dim() == 0:
        idx = idx.reshape(1)
    elif not keepdim:
        idx = idx.unsqueeze(dim)
    picked = inp.take_along_dim(idx, dim)
    if not keepdim and sample.input.dim() != 0:
        picked = picked.squeeze(dim)
    compare(op, picked.reshape(expected[vpos].shape), expected[vpos])


def as_close_as_torch(op, actual, expected, reference, direction) -> bool:
    """float32 results are also accepted when they are as close to torch's float64 answer (the
    same inputs, upcast) as torch's own float32 CPU answer is: no element further from it than
    twice torch's largest error on that output, give or take the tolerance. Both implementations
    round (in another order), neither is the truth."""
    try:
        a, e, r = leaves(actual, []), leaves(expected, []), leaves(reference, [])
        if not (len(a) == len(e) == len(r)):
            return False
        for x, y, z in zip(a, e, r):
            if not isinstance(y, torch.Tensor) or not y.dtype.is_floating_point:
                compare(op, x, y, direction)
                continue
            if not isinstance(x, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype \
                    or not isinstance(z, torch.Tensor) or z.shape != y.shape:
                return False
            atol, rtol = tolerances(op, y.dtype, direction)
            x, y, z = x.double(), y.double(), z.double()
            finite = torch.isfinite(z)
            if not torch.equal(torch.isnan(x), torch.isnan(z)) or not torch.equal(x[~finite & ~torch.isnan(z)],
                                                                               z[~finite & ~torch.isnan(z)]):
                return False
            ours, theirs = (x - z).abs()[finite], (y - z).abs()[finite]
            worst = theirs.max() if theirs.numel() else 0.0     # torch's own largest error on this output
            if not bool((ours <= atol + rtol * z.abs()[finite] + 2 * worst).all()):
                return False
        return True
    except Exception:
        return False
