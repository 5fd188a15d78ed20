"""A Python integer (or a 0-d integer tensor) meets an integer tensor of a narrower dtype: xla gives CPU's
result or CPU's error, for every value whatever its range. CPU converts the number to the tensor's dtype
with a check that lets some values through wrapped (uint8 takes -1 as 255, an int8 divisor 256 is 0) and
refuses others, and some ops take it unconverted (torch 2.15's clamp and hardtanh: a bound past the range
bounds nothing). Compared with the installed torch's own CPU kernels: the versions differ."""

import pytest
import torch
import torch.nn.functional as F

from helpers import same_values


def _index(t):
    return torch.tensor([0], device=t.device)


def _zero_d(t, v):
    return torch.tensor(v, device=t.device)


OPS = {
    "add": lambda t, v: t + v,
    "rsub": lambda t, v: v - t,
    "mul": lambda t, v: t * v,
    "div floor": lambda t, v: torch.div(t, v, rounding_mode="floor"),
    "div trunc": lambda t, v: torch.div(t, v, rounding_mode="trunc"),
    "floor_divide": lambda t, v: torch.floor_divide(t, v),
    "fmod": lambda t, v: torch.fmod(t, v),
    "remainder": lambda t, v: torch.remainder(t, v),
    "eq": lambda t, v: t == v,
    "lt": lambda t, v: t < v,
    "ge": lambda t, v: t >= v,
    "clamp min": lambda t, v: torch.clamp(t, min=v),
    "clamp max": lambda t, v: torch.clamp(t, max=v),
    "clamp both": lambda t, v: torch.clamp(t, -abs(v), abs(v)),
    "hardtanh": lambda t, v: F.hardtanh(t, -abs(v), abs(v)),
    "threshold": lambda t, v: F.threshold(t, v, 7),
    "threshold value": lambda t, v: F.threshold(t, 0, v),
    "where": lambda t, v: torch.where(t > 0, t, v),
    "masked_fill": lambda t, v: t.masked_fill(t > 0, v),
    "fill_": lambda t, v: t.clone().fill_(v),
    "index_fill": lambda t, v: t.index_fill(0, _index(t), v),
    "scatter": lambda t, v: t.scatter(0, _index(t), v),
    "bitwise_and": lambda t, v: t & v,
    "bitwise_xor": lambda t, v: t ^ v,
    "lshift": lambda t, v: t << v,
    "rshift": lambda t, v: t >> v,
    "pow of a number": lambda t, v: torch.pow(v, t.clamp(0, 2)),
    "add alpha": lambda t, v: torch.add(t, t, alpha=v),
    "addcmul value": lambda t, v: torch.addcmul(t, t, t, value=v),
    "searchsorted": lambda t, v: torch.searchsorted(t.sort().values, v),
    "minimum 0-d": lambda t, v: torch.minimum(t, _zero_d(t, v)),
    "logical_and 0-d": lambda t, v: torch.logical_and(t, _zero_d(t, v)),
    "logical_or 0-d": lambda t, v: torch.logical_or(t, _zero_d(t, v)),
    "logical_xor 0-d": lambda t, v: torch.logical_xor(t, _zero_d(t, v)),
    "atan2 0-d": lambda t, v: torch.atan2(t, _zero_d(t, v)),
}
# past each dtype's range on either side, multiples of 2 ** 8, 2 ** 16 and 2 ** 32 (0 once converted)
VALUES = [300, -1, -300, 255, 128, -129, 256, 40000, -40000, 65536, 2 ** 31 + 5, -(2 ** 31) - 5, 2 ** 40]
DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32]


def _outcome(op, device, dtype, value):
    try:
        out = op(torch.tensor([-5, 0, 3, 100], dtype=dtype).to(device), value).cpu()
    except Exception as e:  # noqa: BLE001 - the outcome compared, whatever CPU raises
        return "raises", type(e), str(e)
    values = torch.nan_to_num(out, nan=-777.0) if out.is_floating_point() else out
    return "computes", out.dtype, values.tolist()


def _same(cpu, xla) -> bool:
    """Equal outcomes; float results within the platform's arithmetic where it is not the CPU's
    (XLA:TPU's atan2 differs in the last bits)."""
    if cpu[:2] != xla[:2] or cpu[0] != "computes" or not cpu[1].is_floating_point:
        return cpu == xla
    return same_values(torch.tensor(xla[2], dtype=xla[1]), torch.tensor(cpu[2], dtype=cpu[1]))


@pytest.mark.parametrize("name", sorted(OPS))
def test_an_integer_past_the_dtype_gives_cpus_result_or_error(name):
    differ = [(dtype, v, cpu, xla) for dtype in DTYPES for v in VALUES
              if not _same(cpu := _outcome(OPS[name], "cpu", dtype, v), xla := _outcome(OPS[name], "xla", dtype, v))]
    assert not differ, f"{len(differ)} cases differ from CPU, the first: {differ[0]}"
