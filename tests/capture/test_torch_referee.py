"""Causes of failures in PyTorch's own device-generic test suites (issue 23), each pinned by
CPU parity: the same code runs with d="cpu" and d="xla"; values, dtypes, shapes, strides,
warnings, exception type and message must agree."""

import warnings

import pytest
import torch

import xlanb
from helpers import PLATFORM, same_values, without_platform_notes


def outcome(f, d):
    """What f(d) gives: ("value", cpu copies...) or ("error", type, message), with warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("value", _host(f(d)))
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            result = ("error", type(e), str(e))
    return result, [str(w.message) for w in caught if "Triggered internally" not in str(w.message)
                    or True]


def _host(x):
    if isinstance(x, torch.Tensor):
        return (x.detach().cpu(), x.dtype, tuple(x.shape), x.stride())
    if isinstance(x, (tuple, list)):
        return tuple(_host(y) for y in x)
    return x


def _same(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and same_values(a, b)
    return a == b


def _first_line(message: str) -> str:
    """torch's C++ warnings end with "(Triggered internally at <file>)"; the words before it count."""
    return message.split(" (Triggered internally")[0]


def assert_parity(f):
    """f("xla") behaves as f("cpu"): the same values (dtype, shape, strides), or the same error."""
    (cpu, cpu_warnings), (xla, xla_warnings) = outcome(f, "cpu"), outcome(f, "xla")
    assert cpu[0] == xla[0], f"cpu: {cpu}\nxla: {xla}"
    if cpu[0] == "error":
        assert xla[1] is cpu[1] and xla[2] == cpu[2], f"cpu: {cpu}\nxla: {xla}"
    else:
        assert _same(cpu[1], xla[1]), f"cpu: {cpu[1]}\nxla: {xla[1]}"
    assert [_first_line(w) for w in without_platform_notes(xla_warnings)] == [_first_line(w) for w in cpu_warnings]
    return cpu


# Silent wrong answers ---------------------------------------------------------------------

def test_result_dtype_follows_a_changed_default_dtype():
    def f(d):
        u = torch.tensor([0, 0, 1], dtype=torch.uint8, device=d)
        before = (u + 5.5, u / 2, torch.sqrt(u), torch.mean(u.double()))
        torch.set_default_dtype(torch.float64)
        try:
            return before + (u + 5.5, u / 2, torch.sqrt(u), u.sum() * 0.5, torch.ones(2, device=d) + 1)
        finally:
            torch.set_default_dtype(torch.float32)
    assert assert_parity(f)[1][4][1] == torch.float64


def test_result_dtype_follows_a_changed_default_dtype_in_eager_mode():
    with xlanb.eager_mode_context(True):
        test_result_dtype_follows_a_changed_default_dtype()


def test_nonzero_and_masked_select_write_their_out_tensor():
    def f(d):
        t = torch.tensor([0, 1, 1, 0, 1], device=d)
        nz = torch.empty(0, dtype=torch.long, device=d)
        ms = torch.empty(0, device=d)
        torch.nonzero(t, out=nz)
        torch.masked_select(t.float() * 2, t > 0, out=ms)
        return nz, ms
    assert assert_parity(f)[1][0][2] == (3, 1)


@pytest.mark.parametrize("op", ["nonzero", "masked_select"])
def test_data_dependent_out_of_a_wrong_dtype_raises_cpu_error(op):
    def f(d):
        t = torch.tensor([0, 1, 1], device=d)
        if op == "nonzero":
            return torch.nonzero(t, out=torch.empty(0, device=d))
        return torch.masked_select(t.float(), t > 0, out=torch.empty(0, dtype=torch.long, device=d))
    assert assert_parity(f)[0] == "error"


def test_data_dependent_out_of_another_shape_is_resized_with_torch_warning():
    def f(d):
        out = torch.zeros(5, dtype=torch.long, device=d)
        torch.nonzero(torch.tensor([0, 1, 1], device=d), out=out)
        return out
    assert assert_parity(f)[1][2] == (2, 1)


# out= follows torch ---------------------------------------------------------------------

def test_out_that_must_grow_from_empty_is_resized():
    def f(d):
        out = torch.tensor([], device=d)
        r = torch.add(torch.ones(3, device=d), 1, out=out)
        return r is out, out
    assert_parity(f)


def test_out_with_elements_grows_with_torch_warning():
    def f(d):
        x = torch.arange(12.0, device=d).reshape(3, 4)
        out = torch.ones(2, device=d)
        torch.add(x, 1, out=out)
        torch.add(x, 2, out=out)          # the right shape now: no warning
        return out
    assert_parity(f)


def test_out_resize_warns_each_time_as_cpu_does():
    def f(d):
        x = torch.ones(3, device=d)
        for _ in range(2):
            torch.add(x, 1, out=torch.ones(2, device=d))
    assert_parity(f)


def test_out_of_a_dtype_the_result_cannot_cast_to_is_refused():
    assert assert_parity(lambda d: torch.add(torch.ones(3, device=d), 1.5,
                                             out=torch.empty(3, dtype=torch.long, device=d)))[0] == "error"


def test_factory_out_grows():
    def f(d):
        out = torch.empty(0, device=d)
        torch.arange(5, out=out)
        torch.zeros(2, 3, out=out)
        return out
    assert_parity(f)


def test_resize_grows_keeping_the_elements():
    def f(d):
        z = torch.arange(6.0, device=d)
        z.resize_(2, 3)
        z.resize_(3, 3)
        return z[:2], z.shape
    assert_parity(f)


@pytest.mark.parametrize("fmt", [torch.channels_last, torch.contiguous_format])
def test_resize_takes_the_memory_format(fmt):
    def f(d):
        a = torch.empty(0, device=d).resize_(2, 3, 4, 5, memory_format=fmt)
        b = torch.empty(2, 5, device=d).t().resize_(5, 2)           # same shape, no format: strides kept
        return a.stride(), a.is_contiguous(memory_format=fmt), b.stride()
    assert_parity(f)


# Missing checks: what CPU refuses is refused at the op, with CPU's words -------------------

def test_bool_mask_of_the_wrong_length_raises_index_error():
    assert assert_parity(lambda d: torch.ones(5, 4, device=d)[torch.tensor([True, False, True], device=d)])[1] \
        is IndexError


@pytest.mark.parametrize("mask_shape,prefix", [((3, 2), ()), ((3,), (slice(None),)), ((5, 2), ())])
def test_bool_mask_shapes_are_checked_against_the_indexed_dims(mask_shape, prefix):
    def f(d):
        x = torch.ones(5, 4, device=d)
        return x[prefix + (torch.ones(mask_shape, dtype=torch.bool, device=d),)]
    assert assert_parity(f)[0] == "error"


def test_uint8_mask_gives_torch_deprecation_warning():
    assert_parity(lambda d: torch.arange(4.0, device=d)[torch.tensor([1, 0, 1, 1], dtype=torch.uint8, device=d)])


def test_list_index_into_a_size_0_dim_raises():
    assert assert_parity(lambda d: torch.ones(0, 4, device=d)[[0]])[1] is IndexError


def test_index_assignment_into_a_size_0_dim_raises():
    def f(d):
        a = torch.ones(0, 4, device=d)
        a[[0]] = 1
        return a
    assert assert_parity(f)[0] == "error"     # IndexError up to torch 2.14, RuntimeError from 2.15: CPU's, on xla


@pytest.mark.parametrize("op", ["index_select", "gather"])
def test_select_from_a_size_0_dim_raises(op):
    def f(d):
        x = torch.ones(0, 4, device=d)
        if op == "index_select":
            return torch.index_select(x, 0, torch.tensor([0], device=d))
        return torch.gather(x, 0, torch.tensor([[0]], device=d))
    assert assert_parity(f)[0] == "error"


@pytest.mark.parametrize("value_dtype", [torch.long, torch.float64])
def test_index_put_of_another_dtype_raises(value_dtype):
    def f(d):
        a = torch.zeros(5, device=d)
        a.index_put_((torch.tensor([0], device=d),), torch.tensor([1], dtype=value_dtype, device=d))
        return a
    assert assert_parity(f)[1] is RuntimeError


@pytest.mark.parametrize("op", ["all", "any"])
def test_all_any_into_a_float_out_raise(op):
    def f(d):
        return getattr(torch, op)(torch.ones(3, device=d), out=torch.empty((), device=d))
    assert assert_parity(f)[1] is RuntimeError


@pytest.mark.parametrize("out_dtype", [torch.bool, torch.uint8])
def test_all_any_into_bool_or_uint8_out_compute(out_dtype):
    def f(d):
        x = torch.tensor([1.0, 0.0], device=d)
        return torch.all(x, out=torch.empty((), dtype=out_dtype, device=d)), torch.any(x, 0, out=torch.empty(
            (), dtype=out_dtype, device=d))
    assert_parity(f)


# Errors at the op, the tensors left readable --------------------------------------------

def _raises_then_reads(write):
    def f(d):
        a = torch.arange(25.0, device=d).reshape(5, 5)
        b = a * 2                      # pending work that must not be lost
        try:
            write(a, d)
        except Exception as e:  # noqa: BLE001 - compared with CPU's
            return type(e).__name__, str(e), a, b, a.sum()
        return "no error", a
    return f


def test_index_assignment_of_unbroadcastable_indices_raises_at_the_op():
    def write(a, d):
        a[[0, 1], [0, 1, 2]] = 7
    assert assert_parity(_raises_then_reads(write))[1][0] == "IndexError"


@pytest.mark.parametrize("mask", [[True, False, True], [True, False, True, False, False]])
def test_mask_assignment_of_the_wrong_shape_raises_at_the_op(mask):
    def write(a, d):
        a[torch.tensor(mask, device=d)] = torch.ones(3, device=d)
    assert assert_parity(_raises_then_reads(write))[1][0] != "no error"


def test_index_put_of_values_that_do_not_broadcast_raises_at_the_op():
    def write(a, d):
        a.index_put_((torch.tensor([0, 2], device=d),), torch.ones(3, device=d))
    assert assert_parity(_raises_then_reads(write))[1][0] == "RuntimeError"


@pytest.mark.parametrize("op", ["max", "min", "median", "mode"])
def test_reduction_over_a_size_0_dim_raises_at_the_op(op):
    def f(d):
        x = torch.zeros(0, 3, device=d)
        try:
            getattr(torch, op)(x, 0)
        except IndexError as e:
            return str(e), x, x.sum(1)
    assert_parity(f)


# Not supported: one clear error naming the op, the dtype or layout, and what to do ------------

@pytest.mark.parametrize("make,op,what", [
    (lambda: torch.ones(3, device="xla").to_sparse(), "aten._to_sparse", "sparse_coo layout"),
    (lambda: torch.ones(2, 2, device="xla").to_sparse_csr(), "aten._to_sparse_csr", "sparse_csr layout"),
    (lambda: torch.ones(3).to_sparse().to("xla"), "aten._sparse_coo_tensor_with_dims_and_tensors", "sparse_coo"),
    (lambda: torch.empty(3, layout=torch.sparse_coo, device="xla"), "aten.empty", "sparse_coo layout"),
    (lambda: torch.ones(3, dtype=torch.complex32, device="xla"), "aten.ones", "dtype torch.complex32"),
    (lambda: torch.ones(3, device="xla").to(torch.complex32), "aten._to_copy", "dtype torch.complex32"),
    (lambda: torch.ones(3, dtype=torch.complex32).to("xla"), "aten.empty_strided", "dtype torch.complex32"),
    (lambda: torch.quantize_per_tensor(torch.ones(3, device="xla"), 0.1, 0, torch.quint8),
     "aten.quantize_per_tensor", "dtype torch.quint8"),
    (lambda: torch.empty(3, dtype=torch.qint8, device="xla"), "aten.empty", "dtype torch.qint8"),
    (lambda: torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8).to("xla"), "aten.empty_quantized",
     "dtype torch.quint8"),
])
def test_sparse_quantized_and_complex32_raise_one_clear_error(make, op, what):
    from xlanb.capture.torch_versions import backend_key
    if backend_key("xla") == "XLA":           # torch 2.9: xla is torch's own XLA device type
        if op in ("aten.empty", "aten.empty_quantized"):
            pytest.skip("torch 2.9 parses no SparseXLA or QuantizedXLA dispatch key, so xlanb cannot register "
                        "its refusal there (docs/portability.md: torch 2.9)")
        if op == "aten.empty_strided":
            op = "aten.empty.memory_format"   # torch 2.9 copies to the XLA type through empty, contiguous
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # torch's complex32 / quantization notices
        with pytest.raises(NotImplementedError) as e:
            make()
    message = str(e.value)
    assert message.startswith(op) and what in message and "not supported on xla" in message
    assert "on the CPU" in message


def test_unsupported_op_leaves_other_tensors_usable():
    x = torch.arange(3.0, device="xla") + 1
    with pytest.raises(NotImplementedError):
        x.to_sparse()
    assert x.cpu().tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("dtype,view_dtype", [(torch.float32, torch.int16), (torch.int16, torch.float64),
                                              (torch.float64, torch.uint8), (torch.float32, torch.int32)])
def test_view_dtype_of_a_zero_element_tensor_reads(dtype, view_dtype):
    assert_parity(lambda d: torch.ones(0, 5, 64, dtype=dtype, device=d).view(view_dtype))


@pytest.mark.parametrize("value", [[], [1.0, 2.0, 3.0]])
def test_mask_assignment_checks_the_value_shape_before_its_dtype(value):
    def f(d):
        a = torch.arange(0, 4, device=d)
        a[a > -1] = torch.tensor(value).to(d)
    assert "shape mismatch" in assert_parity(f)[2]


@pytest.mark.parametrize("dims", [[0, -3], [0, 2], [1, 1]])
def test_a_decomposed_op_raises_its_own_cpu_error(dims):
    assert assert_parity(lambda d: torch.arange(1, 5, device=d).view(2, 2).rot90(1, dims))[0] == "error"


@pytest.mark.parametrize("index", [[0, 7], [1, -6], [4, 2, 123343]])
def test_out_of_bounds_list_index_raises_as_on_cpu(index):
    assert assert_parity(lambda d: torch.zeros(5, 3, device=d)[index])[1] is IndexError
    assert assert_parity(lambda d: torch.zeros(3, 5, device=d)[:, index])[1] is IndexError


def test_out_of_bounds_index_assignment_raises_and_leaves_the_tensor_readable():
    def f(d):
        a = torch.zeros(5, device=d)
        try:
            a[torch.tensor([1, 5])] = 1.0
        except IndexError as e:
            return str(e)
    assert_parity(f)
    a = torch.zeros(5, device="xla")
    with pytest.raises(IndexError):
        a[torch.tensor([1, 5])] = 1.0
    assert a.cpu().tolist() == [0.0] * 5          # CPU writes the elements before the bad one; xla none


@pytest.mark.parametrize("op", ["floor", "ceil", "round", "trunc", "sign", "frac", "exp", "sgn", "abs", "angle"])
def test_complex_pointwise_ops_compute_or_refuse_as_on_cpu(op):
    assert_parity(lambda d: getattr(torch, op)(torch.tensor([1 + 1j, -2.5 + 0.5j], device=d)))


def test_complex_out_of_an_op_cpu_refuses_for_complex_raises():
    def f(d):
        t = torch.tensor(1 + 1j, device=d)
        return torch.floor(t, out=torch.empty(0, dtype=torch.complex64, device=d))
    assert assert_parity(f)[1] is NotImplementedError


@pytest.mark.parametrize("shape,fmt", [((2, 3, 4, 5), torch.channels_last), ((2, 2, 3, 4, 5), torch.channels_last_3d),
                                       ((2, 3, 4, 5), torch.contiguous_format)])
def test_resize_as_preserving_the_format_takes_the_template_layout(shape, fmt):
    def f(d):
        template = torch.zeros(shape, device=d).contiguous(memory_format=fmt)
        flat = torch.zeros(template.numel(), device=d)
        flat.resize_as_(template, memory_format=torch.preserve_format)
        return flat.stride()
    assert_parity(f)


def test_out_tensors_that_must_have_the_result_shape_are_written():
    def f(d):
        a = torch.arange(4.0, device=d)
        out1, out2, diag = torch.empty(2, device=d), torch.empty(2, device=d), torch.empty(2, device=d)
        torch.split_copy(a, 2, out=(out1, out2))
        torch.diagonal_copy(a.reshape(2, 2), out=diag)
        return out1, out2, diag
    assert_parity(f)


_ON_TPU = PLATFORM == "tpu"


@pytest.mark.parametrize("dtype,view_dtype", [
    (torch.complex64, torch.int64),
    pytest.param(torch.int64, torch.complex64, marks=pytest.mark.skipif(
        _ON_TPU, reason="XLA:TPU's complex product flushed the subnormal real part (3's bits, 4.2e-45) to zero")),
    pytest.param(torch.float64, torch.complex64, marks=pytest.mark.skipif(
        _ON_TPU, reason="float64's bits are refused on a TPU (its float64 is two float32s)")),
    (torch.int32, torch.float32)])
def test_view_dtype_of_a_0_dim_tensor_computes(dtype, view_dtype):
    def f(d):
        a = torch.tensor(3, device=d).to(dtype)
        v = a.view(view_dtype)
        return v * 1 if not view_dtype.is_complex else torch.view_as_real(v * 1), v.view(dtype) * 1
    assert_parity(f)


# Conjugate and negative views -------------------------------------------------------------

def _complex(d):
    return torch.tensor([[1 + 2j, 3 - 1j], [0.5j, -2 + 0j]], device=d)


@pytest.mark.parametrize("write", [
    lambda t: t.conj().copy_(torch.full_like(t, 5 + 5j)),
    lambda t: t.conj().add_(1j),
    lambda t: t.conj().imag.add_(10),
    lambda t: t.conj().imag.mul_(3),
    lambda t: t.conj()[0].sub_(2j),
    lambda t: t.conj().t().mul_(1j),
])
def test_writes_through_conjugate_and_negative_views_reach_the_base_as_on_cpu(write):
    def f(d):
        t = _complex(d)
        write(t)
        return t
    assert_parity(f)


def test_conjugate_and_negative_bits_are_set_as_on_cpu():
    def bits(d):
        t = _complex(d)
        v = t.conj()
        return (v.is_conj(), v.imag.is_neg(), v.imag.is_conj(), v.t().is_conj(), v.conj().is_conj(),
                v.clone().is_conj(), (v + 1).is_conj(), v.view(4).is_conj())
    assert assert_parity(bits)[1] == (True, True, False, True, False, False, False, True)
    assert_parity(lambda d: (_complex(d).conj().imag * 2, _complex(d).conj() @ _complex(d),
                             _complex(d).conj().sum(), _complex(d).conj().resolve_conj()))


# Checks CPU's kernels make and meta kernels skip --------------------------------------------

@pytest.mark.parametrize("op", [
    lambda x: x.sum(dim=64), lambda x: x.mean(dim=-1), lambda x: x.argmax(dim=0), lambda x: x.argmin(dim=0),
    lambda x: torch.nansum(x, dim=0), lambda x: torch.logsumexp(x, dim=64), lambda x: x.std(dim=-1),
])
def test_reducing_a_tensor_of_more_than_64_dims_raises_as_on_cpu(op):
    result = assert_parity(lambda d: op(torch.ones([1] * 65, device=d)))
    assert result[:2] == ("error", RuntimeError)


@pytest.mark.parametrize("call", [
    lambda d: torch.bucketize(torch.ones(2, 3, device=d), torch.tensor([[1, 2, 3], [4, 5, 6]], device=d)),
    lambda d: torch.searchsorted(torch.tensor([[1, 2, 3], [4, 5, 6]], device=d), 1),
    lambda d: torch.searchsorted(torch.arange(9, device=d), torch.arange(9, device=d), side="bad"),
    lambda d: torch.searchsorted(torch.rand(9, device=d), torch.arange(9, device=d),
                                 sorter=torch.arange(9, device=d).float()),
    lambda d: torch.searchsorted(torch.tensor([1, 2, 3], device=d), 2.5, sorter=torch.tensor([0, 1, 3], device=d)),
    lambda d: torch.searchsorted(torch.tensor([1, 2, 3], device=d), torch.tensor([2.5], device=d),
                                 sorter=torch.tensor([-1, 1, 2], device=d) + 0),
    lambda d: torch.searchsorted(torch.tensor([3, 1, 2], device=d), torch.tensor([2.5, 0.5], device=d),
                                 sorter=torch.tensor([1, 2, 0], device=d)),
])
def test_searchsorted_and_bucketize_check_their_arguments_as_on_cpu(call):
    assert_parity(call)


def test_numpy_of_an_xla_tensor_is_refused_as_for_cuda_and_forced_copies():
    """test_numpy_interop's to_numpy_force_argument: torch refuses .numpy() of a tensor off the CPU
    (a TypeError saying to copy it with .cpu()); force=True copies it, resolving conj and neg bits."""
    data = [[1 + 2j, -2 + 3j], [-1 - 2j, 3 - 2j]]
    x = torch.tensor(data, device="xla", requires_grad=True)
    for t in (x, x.detach().conj(), x.detach()._neg_view()):
        with pytest.raises(TypeError, match=r"can't convert xla:0 device type tensor to numpy\. Use Tensor\.cpu\(\)"):
            t.numpy()
    cpu = torch.tensor(data)
    assert (x.numpy(force=True) == cpu.numpy()).all()
    assert (x.detach().conj().numpy(force=True) == cpu.conj().resolve_conj().numpy()).all()
    assert (x.detach()._neg_view().numpy(force=True) == (-cpu).numpy()).all()


@pytest.mark.parametrize("lengths", [[0, 2, 3, 0], [1, 2, 3, 0], [[0, 3, 3, 0], [2, 3, 0, 0]], [[1, 2, 3, 0], [2, 4, 0, 0]]])
def test_segment_reduce_checks_that_lengths_sum_to_the_data_size_at_the_op(lengths):
    """test_segment_reductions' unsafe_flag: with unsafe=False CPU refuses lengths that do not sum to
    the data's size along the axis (their values, not their shape, decide)."""
    def f(d):
        n = torch.tensor(lengths, device=d)
        data = torch.arange(6.0 * n.shape[0] if n.dim() == 2 else 6.0, device=d).reshape(*n.shape[:-1], 6)
        return torch._segment_reduce(data, "sum", lengths=n, axis=n.dim() - 1, unsafe=False)
    kind = assert_parity(f)[0]
    assert kind == ("error" if lengths in ([0, 2, 3, 0], [[0, 3, 3, 0], [2, 3, 0, 0]]) else "value")


def test_an_error_torch_raises_in_a_cpu_fallback_op_is_raised_as_torchs_at_the_read():
    """segment_reduce has no lowering and runs on the CPU inside the program; with lengths the graph
    computes, its check can only run then. The read raises torch's own error (type and message),
    not XLA's 'INTERNAL: CpuCallback error', names the op, and leaves the inputs readable."""
    data = torch.arange(6.0, device="xla")
    lengths = torch.tensor([0, 2, 3, 0], device="xla") * 1          # pending: not readable at the op
    r = torch._segment_reduce(data, "sum", lengths=lengths, axis=0, unsafe=False)
    for _ in range(2):                                              # the pending work stays, and fails the same way
        with pytest.raises(RuntimeError) as caught:
            r.cpu()
        assert type(caught.value) is RuntimeError
        assert str(caught.value) == ("segment_reduce(): Expected all rows of lengths along axis to sum to "
                                     "data.size(lengths.dim()-1) when !unsafe.")
        assert any("aten.segment_reduce.default, which has no lowering and ran on the CPU" in n
                   for n in caught.value.__notes__)
    assert data.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and lengths.cpu().tolist() == [0, 2, 3, 0]
