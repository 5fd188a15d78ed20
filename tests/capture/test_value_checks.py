"""Float arguments CPU checks against a range (probabilities, rates, standard deviations, BCE's
inputs) raise CPU's error, where XLA would compute: at the op when the values are host-readable or a
Python number, at the next value read when the graph computes them (capture/bounds.py)."""

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close

NAN, INF = float("nan"), float("inf")

OPS = {
    "binary_cross_entropy": lambda v: F.binary_cross_entropy(v, torch.full_like(v, 0.5)),
    "bernoulli": lambda v: torch.bernoulli(v),
    "bernoulli_ tensor p": lambda v: torch.zeros_like(v).bernoulli_(v),
    "multinomial": lambda v: torch.multinomial(v, 1),
    "normal std": lambda v: torch.normal(torch.zeros_like(v), v),
    "normal float mean": lambda v: torch.normal(0.0, v),
    "poisson": lambda v: torch.poisson(v),
}
RANGE = {"binary_cross_entropy": "unit", "bernoulli": "unit", "bernoulli_ tensor p": "unit"}
BAD = {"unit": [[0.5, 1.5, 0.2], [0.5, -0.1, 0.2], [0.5, NAN, 0.2]],
       "positive": [[0.5, -1.0, 0.2], [0.5, NAN, 0.2]]}
GOOD = {"unit": [0.0, 0.5, 1.0], "positive": [0.0, 0.5, 3.0]}


def _outcome(op, device, values, pending):
    v = torch.tensor(values, device=device)
    if pending:
        v = v * 1                       # computed in the pending graph: its values are not on the host
    try:
        r = OPS[op](v).cpu()                 # a value read: a pending check is raised here
        return "ok", (r.tolist() if op == "binary_cross_entropy" else tuple(r.shape))   # random: the shape
    except RuntimeError as e:
        return type(e).__name__, str(e)


def _cases():
    for op in sorted(OPS):
        kind = RANGE.get(op, "positive")
        for values in BAD[kind]:
            yield op, values
        if op != "multinomial":             # multinomial refuses a row of zeros: its good case is below
            yield op, GOOD[kind]
    yield "multinomial", [0.5, 0.0, 3.0]


@pytest.mark.parametrize("op,values", list(_cases()))
def test_out_of_range_float_argument_raises_cpu_error(op, values):
    cpu = _outcome(op, "cpu", values, False)
    xla = _outcome(op, "xla", values, False)                     # uploaded: at the op
    pending = _outcome(op, "xla", values, True)                  # pending: at the value read
    if cpu[0] == "ok" and op == "binary_cross_entropy":
        assert xla[0] == pending[0] == "ok"
        assert_close(torch.tensor(xla[1]), torch.tensor(cpu[1]))
    else:
        assert xla == cpu and pending == cpu


@pytest.mark.parametrize("op", [lambda: torch.bernoulli(torch.zeros(3, device="xla"), p=1.5),
                                lambda: torch.zeros(3, device="xla").bernoulli_(-0.5),
                                lambda: torch.normal(torch.zeros(3, device="xla"), -1.0)])
def test_an_out_of_range_number_raises_at_the_op(op):
    with pytest.raises(RuntimeError) as xla:
        op()
    cpu_op = {0: lambda: torch.bernoulli(torch.zeros(3), p=1.5), 1: lambda: torch.zeros(3).bernoulli_(-0.5),
              2: lambda: torch.normal(torch.zeros(3), -1.0)}
    messages = set()
    for f in cpu_op.values():
        try:
            f()
        except RuntimeError as e:
            messages.add(str(e))
    assert str(xla.value) in messages


def test_dropout_is_not_checked_into_an_error():
    x = torch.ones(4, 4, device="xla")
    assert F.dropout(x, 0.5, training=True).shape == (4, 4)
    assert F.dropout(x, 0.0, training=True).cpu().eq(1).all()


def _cpu_or_xla(f, device, pending):
    try:
        return "ok", f(device, pending).cpu().tolist()
    except RuntimeError as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("shape,mask,n", [((3,), [True, True, True], 2), ((3,), [True, False, True], 2),
                                          ((3, 2), [True, False], 2), ((3, 2), [True, False], 3)],
                         ids=["short", "enough", "broadcast-short", "broadcast-enough"])
def test_masked_scatter_with_too_short_a_source_raises_cpu_error(shape, mask, n):
    def f(device, pending):
        m = torch.tensor(mask, device=device)
        m = m & m if pending else m
        return torch.zeros(shape, device=device).masked_scatter(m, torch.arange(1.0, n + 1, device=device))
    cpu = _cpu_or_xla(f, "cpu", False)
    assert _cpu_or_xla(f, "xla", False) == cpu and _cpu_or_xla(f, "xla", True) == cpu


@pytest.mark.parametrize("repeats", [[1, 2], [1, -1], [0, 0]])
def test_repeat_interleave_with_a_negative_count_raises_cpu_error(repeats):
    f = lambda device, pending: torch.repeat_interleave(torch.tensor(repeats, device=device) * 1)  # noqa: E731
    assert _cpu_or_xla(f, "xla", True) == _cpu_or_xla(f, "cpu", False)


LINALG = {
    "inv": lambda a: torch.linalg.inv(a),
    "solve": lambda a: torch.linalg.solve(a, torch.ones(a.shape[:-1], device=a.device)),
    "cholesky": lambda a: torch.linalg.cholesky(a),
    "lu_factor": lambda a: torch.linalg.lu_factor(a)[0],
    "matrix_power -1": lambda a: torch.linalg.matrix_power(a, -1),
}
MATRICES = {"singular": [[1.0, 2.0], [2.0, 4.0]], "indefinite": [[1.0, 2.0], [2.0, 1.0]],
            "batch": [[[2.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]], "fine": [[2.0, 1.0], [1.0, 2.0]]}


@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("op", sorted(LINALG))
def test_linalg_on_a_singular_or_indefinite_matrix_raises_cpu_error(op, matrix):
    def f(device, pending):
        a = torch.tensor(MATRICES[matrix], device=device)
        return LINALG[op](a * 1 if pending else a)
    cpu = _cpu_or_xla(f, "cpu", False)
    for pending in (False, True):
        xla = _cpu_or_xla(f, "xla", pending)
        if cpu[0] == "ok":
            assert_close(torch.tensor(xla[1]), torch.tensor(cpu[1]))
        else:
            assert xla == cpu                   # LinAlgError where CPU raises it (its type's name compared)


@pytest.mark.parametrize("values,classes", [([0, 2], 3), ([0, 4], 3), ([0, -1], 3), ([0, 4], -1), ([0, -2], -1),
                                            ([], 3), ([], -1)])
def test_one_hot_checks_class_values_as_cpu(values, classes):
    """torch checks one_hot's values on CPU only (a device assert elsewhere): xla checks them as an index."""
    def f(device, pending):
        t = torch.tensor(values, dtype=torch.int64, device=device)
        return F.one_hot(t * 1 if pending else t, classes)
    cpu = _cpu_or_xla(f, "cpu", False)
    assert _cpu_or_xla(f, "xla", False) == cpu and _cpu_or_xla(f, "xla", True) == cpu


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_one_hot_refuses_a_non_long_tensor_as_cpu(dtype):
    with pytest.raises(RuntimeError) as cpu:
        F.one_hot(torch.tensor([1], dtype=dtype), 3)
    with pytest.raises(RuntimeError) as xla:
        F.one_hot(torch.tensor([1], dtype=dtype, device="xla"), 3)
    assert str(xla.value) == str(cpu.value)


@pytest.mark.parametrize("value,msg", [(0.0, "boom"), (0.0, None), (2.0, "boom"), (NAN, None), (False, "flag")])
def test_assert_async_raises_as_on_cpu(value, msg):
    """torch's own checks off the CPU call _assert_async: it raises when the value is zero (NaN is not)."""
    extra = (msg,) if msg is not None else ()

    def f(device, pending):
        t = torch.tensor(value, device=device)
        torch._assert_async(t | t if pending and t.dtype == torch.bool else t * 1 if pending else t, *extra)
        return torch.ones(1, device=device)                     # a value read
    cpu = _cpu_or_xla(f, "cpu", False)
    assert _cpu_or_xla(f, "xla", False) == cpu and _cpu_or_xla(f, "xla", True) == cpu


@pytest.mark.parametrize("q", [[0.5], [1.5], [-0.1], [0.2, 0.9]])
@pytest.mark.parametrize("op", [torch.quantile, torch.nanquantile], ids=["quantile", "nanquantile"])
def test_quantile_checks_q_as_cpu(op, q):
    """torch checks q's values on CPU only: xla checks them as a range above the composite."""
    def f(device, pending):
        qq = torch.tensor(q, device=device)
        return op(torch.tensor([1.0, 2.0, 3.0, NAN], device=device), qq * 1 if pending else qq)
    cpu = str(_cpu_or_xla(f, "cpu", False))                        # as text: NaN equals NaN
    assert str(_cpu_or_xla(f, "xla", False)) == cpu and str(_cpu_or_xla(f, "xla", True)) == cpu


def test_quantile_keeps_its_gradient():
    x = torch.randn(4, 5, requires_grad=True)
    xl = x.detach().to("xla").requires_grad_()
    torch.quantile(x, torch.tensor([0.3]), dim=1).sum().backward()
    torch.quantile(xl, torch.tensor([0.3], device="xla"), dim=1).sum().backward()
    assert_close(xl.grad.cpu(), x.grad)
