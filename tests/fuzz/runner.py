"""Runs a fuzz program on CPU and on xla and compares what both leave behind: every live tensor
variable (values, shape, dtype, strides where torch defines them), every `.grad`, every value read
and the type of every exception a statement raised.

    python tests/fuzz/runner.py --seeds 1000      # seeds 0..999; shrinks and prints failures
"""

import argparse
import contextlib
import os
import sys
import time
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import xlanb  # noqa: E402
from programs import Program, generate, tensors_in  # noqa: E402


# Documented limits (docs/troubleshooting.md): xla refuses these programs with a clear error
# where CPU runs them. A program that meets one counts as "limit", not as a failure.
LIMITS = ("changes the shape of a tensor in place while a view of it",
          "reads memory outside the tensor it was taken from and takes part in autograd")


@dataclass
class Result:
    status: str                    # "ok", "limit", "undefined" (no reference), "mismatch" or "error"
    detail: str = ""               # the first difference, in one line
    stride_diffs: list = field(default_factory=list)

    @property
    def ok(self):
        return self.status in ("ok", "limit", "undefined")


class UndefinedConversions(TorchDispatchMode):
    """Notes a float -> integer conversion of NaN, inf or an out-of-range value on CPU: torch leaves
    its result undefined (x86 gives the smallest integer, XLA 0 for NaN and saturation), so a
    program that makes one has no reference to compare with; so does an in-place op that reads
    elements it writes (`_reads_what_it_writes`)."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        if func._schema.is_mutable and not name.startswith("aten.set_") and args and isinstance(args[0], torch.Tensor) \
                and not self.seen:      # set_ writes no element
            self.seen = any(_reads_what_it_writes(args[0], a) for a in args[1:] if isinstance(a, torch.Tensor))
        out = func(*args, **kwargs)
        if name in ("aten._to_copy.default", "aten.copy_.default") and isinstance(out, torch.Tensor):
            src = args[1] if name == "aten.copy_.default" else args[0]
            if isinstance(src, torch.Tensor) and src.is_floating_point() and not out.is_floating_point() \
                    and out.dtype != torch.bool and src.numel():
                info = torch.iinfo(out.dtype)
                signed = info.min < 0
                low, high = (-(2.0 ** (info.bits - 1)), 2.0 ** (info.bits - 1)) if signed else (0.0, 2.0 ** info.bits)
                x = src.detach().double().trunc()
                if not (x.isfinite() & (x >= low) & (x < high)).all():
                    self.seen = True
        return out


def _offsets(t: torch.Tensor) -> torch.Tensor:
    """The storage offset of each element of `t`: `t`'s layout over the storage's positions."""
    positions = torch.arange(t.untyped_storage().nbytes() // t.element_size())
    return positions.as_strided(t.shape, t.stride(), t.storage_offset())


def _reads_what_it_writes(out: torch.Tensor, operand: torch.Tensor) -> bool:
    """An in-place op's operand shares memory with the tensor written, and not element for element
    (`t.add_(t[..., :1])`): torch checks only simple layouts for that, and otherwise its CPU result
    depends on the kernel's loop order, which reads elements it already wrote."""
    if out.device.type != "cpu" or operand.device.type != "cpu" or not out.numel() or not operand.numel():
        return False
    if out.untyped_storage().data_ptr() != operand.untyped_storage().data_ptr():
        return False
    written, read = _offsets(out), _offsets(operand)
    if not bool(torch.isin(read, written).any()):
        return False
    try:
        return not bool((read.expand_as(written) == written).all())
    except RuntimeError:          # not broadcastable to the written shape
        return True


def execute(program: Program, device: str, watch: UndefinedConversions | None = None):
    """(namespace, exception or None) after running `program` with `d = device`."""
    ns = {"d": device}
    try:
        with watch if watch is not None else contextlib.nullcontext():
            exec(compile(program.source(), f"<fuzz {program.seed} {device}>", "exec"), ns)
    except Exception as e:       # the exception is part of what is compared
        return ns, e
    return ns, None


def _to_cpu(t):
    return t.detach().cpu() if t.device.type != "cpu" else t.detach()


def _defined_strides(t):
    """Strides torch pins down: a dimension of size 0 or 1 may have any stride."""
    return tuple(st for st, n in zip(t.stride(), t.shape) if n > 1)


def _within_cpus_own_error(value, ref, exact) -> bool:
    """Values differ, but on the scale that CPU's float32 result differs from the same program run
    in float64 (`exact`): an ill-conditioned chain (sin of exp of a cumsum) amplifies one-ulp
    differences between kernels, and that is not a bug. The scale is CPU's largest error over
    the tensor (at one element CPU may be right by chance where a kernel one ulp off is not)."""
    if exact is None or not ref.is_floating_point() or exact.shape != ref.shape or not ref.numel():
        return False
    exact = exact.detach().double()
    cpu_error = (ref.detach().double() - exact).abs().nan_to_num(0.0).max()
    xla_error = (value.double() - exact).abs()
    bound = 8 * cpu_error + 1e-5 + 1.3e-5 * exact.abs()
    return bool(((xla_error <= bound) | (value.isnan() & ref.isnan())).all())


def _compare_tensor(name, ref, got, stride_diffs, exact=None):
    if got is None or not isinstance(got, torch.Tensor):
        return f"{name}: {type(got).__name__} on xla, tensor on cpu"
    if tuple(ref.shape) != tuple(got.shape):
        return f"{name}: shape {tuple(got.shape)} on xla, {tuple(ref.shape)} on cpu"
    if ref.dtype != got.dtype:
        return f"{name}: dtype {got.dtype} on xla, {ref.dtype} on cpu"
    try:
        value = _to_cpu(got)
    except Exception as e:
        return f"{name}: reading it on xla raised {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    try:
        torch.testing.assert_close(value, ref.detach(), rtol=1.3e-6 * 10, atol=1e-5, equal_nan=True)
    except AssertionError as e:
        if not _within_cpus_own_error(value, ref, exact() if exact else None):
            return f"{name}: values differ ({' '.join(str(e).split())[:200]})"
    try:
        if ref.numel() and _defined_strides(got) != _defined_strides(ref):     # an empty tensor's are arbitrary
            stride_diffs.append(f"{name}: stride {got.stride()} on xla, {ref.stride()} on cpu")
    except Exception:     # noqa: BLE001 - a stride xla cannot report is a stride difference too
        stride_diffs.append(f"{name}: no stride on xla, {ref.stride()} on cpu")
    return None


def _float64_namespace(program: Program):
    """The program run on CPU with its float inputs made float64 (None if that run fails)."""
    statements = [st.replace(".to(d)", ".double().to(d)", 1) if st.split(" = ")[-1].startswith("torch.randn") else st
                  for st in program.statements]
    ns, err = execute(program.with_statements(statements), "cpu")
    return None if err is not None else ns


def compare(program: Program) -> Result:
    """Runs `program` on CPU then on xla (fresh runtime) and returns the first difference."""
    watch = UndefinedConversions()
    ref_ns, ref_err = execute(program, "cpu", watch)
    if watch.seen:
        return Result("undefined", "a float -> integer conversion of NaN, inf or an out-of-range value, or an "
                                   "in-place op reading elements it writes")
    xlanb.reset()
    got_ns, got_err = execute(program, "xla")
    if ref_err is not None or got_err is not None:
        if ref_err is not None and got_err is not None and type(ref_err) is type(got_err):
            return Result("ok", f"both raised {type(ref_err).__name__}")
        if ref_err is None and isinstance(got_err, NotImplementedError) and any(w in str(got_err) for w in LIMITS):
            return Result("limit", str(got_err).splitlines()[0][:200])
        describe = lambda e: f"{type(e).__name__}: {str(e).splitlines()[0][:200]}" if e else "nothing"  # noqa: E731
        return Result("error", f"cpu raised {describe(ref_err)}; xla raised {describe(got_err)}")
    strides = []
    exact_ns = []                  # the float64 run, made on the first value difference
    def exact(name, grad=False):
        if not exact_ns:
            exact_ns.append(_float64_namespace(program))
        t = (exact_ns[0] or {}).get(name)
        return t.grad if grad and t is not None else t
    for name, ref in tensors_in(ref_ns).items():
        got = got_ns.get(name)
        diff = _compare_tensor(name, ref, got, strides, lambda: exact(name))
        if diff is None and ref.is_leaf and ref.requires_grad:
            if ref.grad is not None:
                diff = _compare_tensor(f"{name}.grad", ref.grad, got.grad, strides, lambda: exact(name, True))
            elif got.grad is not None:
                diff = f"{name}.grad: a tensor on xla, None on cpu"
        if diff:
            return Result("mismatch", diff, strides)
    try:
        torch.testing.assert_close(got_ns["reads"], ref_ns["reads"], rtol=1e-4, atol=1e-4, equal_nan=True)
    except (AssertionError, TypeError, ValueError) as e:
        return Result("mismatch", f"reads differ ({' '.join(str(e).split())[:200]})", strides)
    if strides:
        return Result("mismatch", strides[0], strides)
    if got_ns["errors"] != ref_ns["errors"]:
        return Result("mismatch", f"raised {got_ns['errors']} on xla, {ref_ns['errors']} on cpu", strides)
    return Result("ok", "", strides)


def main(argv=None):
    from shrink import shrink

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000, help="run seeds 0..N-1")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--growth", action="store_true", help="add the decode-loop family (tensors grown by cat)")
    parser.add_argument("--progress", type=int, default=0, metavar="K", help="print a line every K seeds")
    args = parser.parse_args(argv)
    t0 = time.time()
    failures, limits, undefined = [], [], []
    for seed in range(args.start, args.start + args.seeds):
        program = generate(seed, growth=args.growth)
        result = compare(program)
        if result.status == "limit":
            limits.append(seed)
        elif result.status == "undefined":
            undefined.append(seed)
        elif not result.ok:
            failures.append((program, result))
            print(f"seed {seed}: {result.status}: {result.detail}", flush=True)
        if args.progress and (seed - args.start + 1) % args.progress == 0:
            print(f"... {seed - args.start + 1} seeds, {len(failures)} failed ({time.time() - t0:.0f} s)", flush=True)
    passed = args.seeds - len(failures) - len(limits) - len(undefined)
    print(f"seeds {args.start}-{args.start + args.seeds - 1}: {passed} passed, {len(failures)} failed, "
          f"{len(limits)} met a documented limit, {len(undefined)} undefined in torch ({time.time() - t0:.0f} s)")
    if undefined:
        print("undefined programs (float -> integer of NaN/inf/out of range, an in-place op reading what it writes):", ", ".join(map(str, undefined)))
    if limits:
        print("documented limits met by seeds:", ", ".join(map(str, limits)))
    for program, result in failures:
        small = program if args.no_shrink else shrink(program)
        print(f"\n# seed {program.seed}: {compare(small).detail}\n{small.source('xla')}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
