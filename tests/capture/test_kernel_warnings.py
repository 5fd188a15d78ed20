"""A kernel's warning reaches the user as on the CPU: once per call, at the line that called the op,
and never from xlanb's own probes of CPU's kernels (capture/record.py's give_warnings,
lower/fallback.py's with_warnings)."""

import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import xlanb  # noqa: F401 - registers the xla device


def _first_line(message) -> str:
    """torch's C++ warnings end with "(Triggered internally at <file>)"; the words before it count."""
    return str(message).split(" (Triggered internally")[0]


def _warnings_per_call(f, device, calls=3, action="always"):
    """[(texts, lines)] of each call of f(device), under the warnings filter `action`; on a TPU less
    xlanb's own note that float64 is emulated there (capture/checks.py's check_tpu_x64)."""
    found = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        for _ in range(calls):
            before = len(caught)
            f(device)
            found.append([(w.category, _first_line(w.message), w.filename, w.lineno) for w in caught[before:]
                          if "on a TPU is emulated" not in str(w.message)])
    return found


def _random_out_of_range(dtype):
    def f(device):
        torch.empty(3, dtype=dtype, device=device).random_(-2**60, 0)    # the warning names this line
    return f


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float32])
def test_a_kernels_warning_is_given_at_every_call_and_at_the_callers_line(dtype):
    """random_ warns from its C++ kernel (meta's and CPU's alike); xlanb gave it twice on a signature's
    first call (the meta kernel and CPU's probe) and never again."""
    cpu = _warnings_per_call(_random_out_of_range(dtype), "cpu")
    xla = _warnings_per_call(_random_out_of_range(dtype), "xla")
    assert [len(w) for w in cpu] == [1, 1, 1]
    assert xla == cpu


def test_the_default_filter_shows_it_once_per_line_as_on_cpu():
    cpu = _warnings_per_call(_random_out_of_range(torch.float32), "cpu", calls=4, action="default")
    xla = _warnings_per_call(_random_out_of_range(torch.float32), "xla", calls=4, action="default")
    assert [len(w) for w in xla] == [len(w) for w in cpu] == [1, 0, 0, 0]


def test_warnings_as_errors_raise_as_on_cpu():
    for device in ("cpu", "xla"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="is out of bounds"):
                _random_out_of_range(torch.float32)(device)


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_probe_that_raises_with_a_warning_held_raises_cpus_error():
    """A CPU probe whose kernel warned and then raised: the error is CPU's (it surfaced as
    'SystemError: <class UserWarning> returned a result with an exception set' once a warning was held)."""
    out = _run("""
        import warnings, torch, xlanb
        try:
            torch.ones(2, 2, device="xla").to_sparse_csr()
        except NotImplementedError:
            pass
        for device in ("cpu", "xla"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    torch.zeros(3, device=device).masked_scatter_(torch.ones(3, dtype=torch.uint8, device=device),
                                                                  torch.ones(3, device=device))
                except Exception as e:
                    print(type(e).__name__, e)
    """).splitlines()
    assert len(out) == 2 and out[0] == out[1] and out[0].startswith("RuntimeError")
