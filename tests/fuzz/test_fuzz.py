"""The differential fuzzer's quick set: seeded random programs must match torch CPU on xla, and
each bug the fuzzer found stays here, shrunk, as a regression test.

`make fuzz` (tests/fuzz/runner.py) runs the long range and shrinks what fails."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from programs import Program, generate  # noqa: E402
from runner import compare  # noqa: E402

# Every fourth seed of 0-599: about 40 s. `make fuzz N=10000` runs seeds 0-9999.
QUICK_SEEDS = list(range(0, 600, 4))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("seed", QUICK_SEEDS)
def test_random_program_matches_cpu(seed):
    program = generate(seed)
    result = compare(program)
    assert result.ok, f"{result.status}: {result.detail}\n{program.source('xla')}"


def assert_matches_cpu(statements):
    program = Program(0, statements)
    result = compare(program)
    assert result.ok, f"{result.status}: {result.detail}\n{program.source('xla')}"


# The bugs the fuzzer found, shrunk. The first two are the programs of the fuzzer's issue.

def test_reshape_after_t_of_expanded_sum_from_issue():
    """reshape(-1) of a t_()-ed result with a transposed layout is a view on CPU (it raised
    'view size is not compatible' on xla: the host replayed views on a row-major copy)."""
    assert_matches_cpu(["base = torch.randn(4, 6).to(d)", "base.transpose_(0, 1)",
                        "y = base[..., :1].expand_as(base) + base", "v = y[0]", "y.t_()",
                        "r = y.reshape(-1).cpu()"])


def test_as_strided_after_transpose_of_expanded_sum_from_issue():
    """as_strided reads memory order; an elementwise result of a transposed input keeps the
    input's layout, so memory order is not row-major (xla read row-major: wrong values)."""
    assert_matches_cpu(["base = torch.randn(4, 6).to(d)", "base.t_()",
                        "y = base[..., :1].expand_as(base) + base", "y.transpose_(0, 1)",
                        "r = y.as_strided((2, 2), (1, 2))"])


def test_as_strided_of_elementwise_result_on_transposed_input():
    """Fuzz seed 176: strides (1, 4) after `w.t() * 2.5`."""
    assert_matches_cpu(["w = torch.randn(4, 6).to(d)", "t4 = w.t() * 2.5",
                        "t6 = t4.as_strided((2, 2), (1, 2))", "r = t6 * 1"])


def test_view_of_transposed_elementwise_result_on_transposed_input():
    """Fuzz seed 300: `t4.t()` is contiguous on CPU, so view(-1) is allowed."""
    assert_matches_cpu(["w = torch.randn(4, 6).to(d)", "t4 = w.t() * 2.5", "t6 = t4.t().view(-1)"])


def test_op_on_as_strided_of_column_slice():
    """Fuzz seed 443: as_strided of a view reads the view's storage, not the view (it was right
    when read alone, wrong inside a graph)."""
    assert_matches_cpu(["a = torch.randn(4, 6).to(d)", "t5 = a[:, :1].as_strided((2, 2), (1, 2))", "r = t5 * 1",
                        "t6 = a[1:].as_strided((2, 3), (1, 2))", "r6 = t6 + 0"])


def test_backward_through_slice_after_unsqueeze_of_its_base_is_refused_clearly():
    """Fuzz seed 1397: torch rebuilds a subclass view's autograd node by replaying the view on
    its base's new shape, so backward failed with a shape error far from the cause. The in-place
    shape change is refused where it happens, naming the op and the way out (a documented limit)."""
    import torch
    import xlanb  # noqa: F401

    w = torch.randn(24, device="xla").requires_grad_()
    t7 = w * 2
    t9 = t7[20:]
    with pytest.raises(NotImplementedError, match=r"unsqueeze_\(\) changes the shape of a tensor in place while "
                                                  r"a view of it \(shape \[4\]\) takes part in autograd"):
        t7.unsqueeze_(0)
    assert t7.shape == (24,)
    t9.sum().backward()                              # nothing was lost: the graph still works
    assert w.grad.cpu()[20:].tolist() == [2.0] * 4 and w.grad.cpu()[:20].abs().sum().item() == 0
    del t9
    t7.unsqueeze_(0)                                 # without a live differentiable view it is allowed
    assert t7.shape == (1, 24)


def test_subtracting_a_bool_tensor_raises_as_on_cpu():
    """Fuzz seed 322: torch's meta kernel for sub has no bool check; CPU raises."""
    assert_matches_cpu(["c = torch.randint(-3, 4, (4, 1)).to(d)", "m = (torch.randn(4, 6) > 0).to(d)",
                        "try:\n    t = c - m\nexcept Exception as ex:\n    errors.append(type(ex).__name__)",
                        "try:\n    t = m.abs()\nexcept Exception as ex:\n    errors.append(type(ex).__name__)",
                        "try:\n    t = c.float() & c.float()\nexcept Exception as ex:\n"
                        "    errors.append(type(ex).__name__)"])


def test_cat_of_zero_dim_tensors_raises_cpus_error_type():
    """Fuzz seed 73: the meta kernel raised IndexError, CPU raises RuntimeError."""
    assert_matches_cpu(["e = torch.randn(2, 3).to(d)",
                        "try:\n    t = torch.cat([e.sum(), e.sum()])\nexcept Exception as ex:\n"
                        "    errors.append(type(ex).__name__)"])


def test_resize_of_a_transposed_layout_result_takes_memory_order():
    """Fuzz seed 151: resize_ keeps the first elements of the storage, in memory order."""
    assert_matches_cpu(["c = torch.randint(-3, 4, (4, 1)).to(d)", "t1 = c.as_strided((2, 2), (1, 2))",
                        "t6 = 2.5 * t1", "t6.resize_(2)", "w = torch.randn(4, 6).to(d)", "v = w.t() * 1",
                        "v.resize_(3, 2)"])


def test_resize_while_views_share_the_storage():
    """Fuzz seed 112: resize_ of a tensor whose storage a view shares (refused before)."""
    assert_matches_cpu(["a = torch.randn(4, 6).to(d)", "v = a[1:]", "a.resize_(12)", "a.add_(1)", "r = v * 1"])


def test_set_shares_the_source_storage():
    """set_(src) was a copy broadcast to the old shape (a lowering error at the next sync)."""
    assert_matches_cpu(["x = torch.randn(4, 6).to(d)", "y = torch.randn(3, 2).to(d)", "x.set_(y)", "x.add_(1)",
                        "r = y * 1"])


def test_matmul_of_bool_tensors_raises_as_on_cpu():
    """Fuzz seed 5319: CPU has no bool kernel for dot/mm; XLA would have computed one."""
    assert_matches_cpu(["m = (torch.randn(4, 6) > 0).to(d)", "t = m.all(0)",
                        "try:\n    r = t @ t\nexcept Exception as ex:\n    errors.append(type(ex).__name__)",
                        "try:\n    r = m.t() @ m\nexcept Exception as ex:\n    errors.append(type(ex).__name__)",
                        "k = m.sum(0) + m.any(1).sum()"])


def test_an_ill_conditioned_chain_is_judged_against_float64():
    """Fuzz seed 6005: sin(exp(cumsum(cumsum(w)))) amplifies a one-ulp difference in exp to 2e-3;
    CPU's own float32 result is as far from the float64 one, so it is no mismatch."""
    assert_matches_cpu(["w = torch.randn(4, 6).to(d).requires_grad_()", "t2 = w.cumsum(0)", "t4 = t2.cumsum(0)",
                        "with eager(True):\n    t10 = t4.exp()", "t25 = t10.sin()"])


def test_a_real_difference_is_still_one():
    import torch
    from runner import _within_cpus_own_error

    exact = torch.tensor([0.5, 1000.0], dtype=torch.float64)
    ref = exact.float()                                        # CPU is exact here
    assert _within_cpus_own_error(ref.clone(), ref, exact)
    assert not _within_cpus_own_error(ref + torch.tensor([0.01, 0.0]), ref, exact)
    assert not _within_cpus_own_error(ref + 1, ref, None)      # no float64 run: no allowance


def test_in_place_write_under_an_outside_reaching_as_strided_view_is_refused_clearly():
    """Fuzz seed 6111: after an in-place write, CPU rebuilds the gradient of an as_strided view
    that reaches outside its input with as_strided over the base; a subclass's replay of the view
    ops gave zeros. The write is refused (a documented limit), nothing is lost, and without a
    live differentiable view it is allowed."""
    import torch

    w = torch.randn(4, 6, device="xla").requires_grad_()
    t7 = w * 1
    t16 = t7[..., :1].as_strided((2, 3), (1, 2), 1)
    with pytest.raises(NotImplementedError, match=r"an in-place write to a tensor while an as_strided view of it "
                                                  r"\(shape \[2, 3\]\) reads memory outside"):
        t7[..., :1].diagonal().add_(-1)
    t16.sum().backward()                   # as on CPU without the write: only w[1, 0] (storage 6) is inside
    expected = torch.zeros(4, 6)
    expected[1, 0] = 1
    assert torch.equal(w.grad.cpu(), expected)
    del t16
    t7[..., :1].add_(1)                    # the outside-reaching view is gone: allowed
    inside = t7.as_strided((2, 3), (1, 2), 1)    # of the base itself: no hazard
    t7.add_(1)
    assert inside.shape == (2, 3)


def test_an_undefined_float_to_int_conversion_has_no_reference():
    """Fuzz seed 8774: std over a dim of size 1 is NaN, and NaN.int() is undefined in torch (CPU on
    x86 gives INT_MIN, XLA 0): such a program is "undefined", not compared; a defined one is."""
    undefined = Program(0, ["b = torch.randn(4, 1).to(d)", "t7 = b.std(1)", "t10 = t7.int() * 3",
                            "t11 = t10 >= -0.5"])
    assert compare(undefined).status == "undefined"
    assert_matches_cpu(["k = torch.tensor([1.5, -2.5, 3e9]).to(d).long()", "j = torch.tensor([1.9, -7.2]).to(d).int()"])


def test_elementwise_output_layout_follows_cpu_for_size_one_dims():
    """Fuzz seed 9582: after t_() and unsqueeze_(), inputs with size-1 dims of odd strides made the
    meta kernel choose a row-major output where CPU's TensorIterator keeps a transposed one."""
    assert_matches_cpu(["b = torch.randn(4, 1).to(d)", "c = torch.randint(-3, 4, (4, 1)).to(d)", "c.t_()",
                        "t3 = b[..., :1].expand_as(b) + b", "c.unsqueeze_(0)", "t3.unsqueeze_(2)",
                        "t14 = t3.max(2).values", "t17 = c * t14"])


def test_an_in_place_op_reading_elements_it_writes_has_no_reference():
    """Fuzz seed 244: `t4.add_(t4[..., :1])` reads column 0 after writing it on CPU (torch checks
    overlap for simple layouts only), so the CPU's result is its loop order's; the program is not
    compared. An operand that is the written tensor itself, or memory beside it, is compared."""
    result = compare(Program(0, ["a = torch.randn(4, 6).to(d)", "t4 = a.cumsum(0)", "t4.add_(t4[..., :1])"]))
    assert result.status == "undefined" and "reading elements it writes" in result.detail
    assert_matches_cpu(["a = torch.randn(4, 6).to(d)", "a.add_(a)", "a[:, 1:].add_(a[:, :1])", "a.mul_(a.t().t())"])


def test_the_generator_makes_products_of_fills():
    """Products whose operand is a fill, summed in the same graph (docs/portability.md, XLA:CPU's
    YNNPACK fusions) are among the programs."""
    sources = "\n".join(generate(seed).source() for seed in range(40))
    assert "torch.ones(" in sources and "@ " in sources and ").sum(" in sources
