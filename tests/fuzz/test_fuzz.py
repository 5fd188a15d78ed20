"""The differential fuzzer's quick set: seeded random programs must match torch CPU on xla, and
each bug the fuzzer found stays here, shrunk, as a strict xfail that flips when it is fixed.

`make fuzz` (tests/fuzz/runner.py) runs the long range and shrinks what fails."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from programs import Program, generate  # noqa: E402
from runner import compare  # noqa: E402

# Seeds 0-999 of the current generator: 992 of 1000 passed (the 8 failures are the as_strided and
# view bugs below); of seeds 1000-1499 without as_strided, 401 of 402 passed (seed 1397: the
# backward bug below); 1500-1899 without as_strided: 333 of 333 passed. Every fourth seed of
# 0-199 (all pass) keeps the set near 10 s.
QUICK_SEEDS = [s for s in range(0, 200, 4) if s != 176]


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


@pytest.mark.xfail(strict=True, reason="reshape(-1) of a t_()-ed expand_as+add result raises 'view size is "
                                       "not compatible' on xla; CPU returns a view")
def test_reshape_after_t_of_expanded_sum_from_issue():
    assert_matches_cpu(["base = torch.randn(4, 6).to(d)", "base.transpose_(0, 1)",
                        "y = base[..., :1].expand_as(base) + base", "v = y[0]", "y.t_()",
                        "r = y.reshape(-1).cpu()"])


@pytest.mark.xfail(strict=True, reason="as_strided of a permuted-layout tensor reads row-major order on xla, "
                                       "storage order on CPU")
def test_as_strided_after_transpose_of_expanded_sum_from_issue():
    assert_matches_cpu(["base = torch.randn(4, 6).to(d)", "base.t_()",
                        "y = base[..., :1].expand_as(base) + base", "y.transpose_(0, 1)",
                        "r = y.as_strided((2, 2), (1, 2))"])


@pytest.mark.xfail(strict=True, reason="as_strided of an elementwise result with a permuted layout (strides "
                                       "(1, 4)) reads row-major order on xla, storage order on CPU (fuzz seed 176)")
def test_as_strided_of_elementwise_result_on_transposed_input():
    assert_matches_cpu(["w = torch.randn(4, 6).to(d)", "t4 = w.t() * 2.5",
                        "t6 = t4.as_strided((2, 2), (1, 2))"])


@pytest.mark.xfail(strict=True, reason="view(-1) of the t() of an elementwise result with a permuted layout "
                                       "(contiguous on CPU) raises 'view size is not compatible' when read on "
                                       "xla (fuzz seed 300)")
def test_view_of_transposed_elementwise_result_on_transposed_input():
    assert_matches_cpu(["w = torch.randn(4, 6).to(d)", "t4 = w.t() * 2.5", "t6 = t4.t().view(-1)"])


@pytest.mark.xfail(strict=True, reason="as_strided of a column slice is right when read alone but an op on it "
                                       "inside a lazy graph reads the wrong elements on xla (fuzz seed 443)")
def test_op_on_as_strided_of_column_slice():
    assert_matches_cpu(["a = torch.randn(4, 6).to(d)", "t5 = a[:, :1].as_strided((2, 2), (1, 2))", "r = t5 * 1"])


@pytest.mark.xfail(strict=True, reason="after unsqueeze_() on the base of a slice, backward through the slice "
                                       "expects the slice replayed on the new base shape ([0, 24]) on xla "
                                       "(fuzz seed 1397)")
def test_backward_through_slice_after_unsqueeze_of_its_base():
    assert_matches_cpu(["w = torch.randn(24).to(d).requires_grad_()", "t7 = w * 2", "t9 = t7[20:]",
                        "t7.unsqueeze_(0)", "t9.sum().backward()"])
