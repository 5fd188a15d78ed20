"""glibc's malloc set for XLA's CPU temporaries (state.py: reuse_host_memory, cpu_only)."""

import os
import subprocess
import sys

import pytest

from xlanb import state
from xlanb._config import config


class _Libc:
    def __init__(self, answer=1):
        self.calls, self.answer = [], answer

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return self.answer


def test_reuse_host_memory_sets_mallopt_on_glibc(monkeypatch):
    libc = _Libc()
    monkeypatch.setattr(state.os, "confstr", lambda name: "glibc 2.36")
    monkeypatch.setattr(state.ctypes, "CDLL", lambda name: libc)
    assert state.reuse_host_memory() is True
    assert libc.calls == [(-8, 1), (-4, 0), (-1, 1 << 30)]       # M_ARENA_MAX, M_MMAP_MAX, M_TRIM_THRESHOLD


def test_reuse_host_memory_leaves_other_libcs_alone(monkeypatch):
    libc = _Libc()
    monkeypatch.setattr(state.os, "confstr", lambda name: None)     # musl: no CS_GNU_LIBC_VERSION
    monkeypatch.setattr(state.ctypes, "CDLL", lambda name: libc)
    assert state.reuse_host_memory() is False and libc.calls == []
    monkeypatch.setattr(state.os, "confstr", lambda name: "glibc 2.36")
    assert state.reuse_host_memory() is True
    monkeypatch.setattr(state.ctypes, "CDLL", lambda name: _Libc(answer=0))
    assert state.reuse_host_memory() is False                        # mallopt refused a parameter


def test_too_late_once_jax_started_its_backends():
    import jax
    jax.devices()
    assert state.cpu_only("cpu") is False and state.cpu_only(None) is False


def test_it_cannot_change_after_the_device_is_found():
    import xlanb
    xlanb.runtime_state().jax_device()
    with pytest.raises(ValueError, match="host_memory_reuse cannot change after xlanb is imported"):
        xlanb.config.set_config(host_memory_reuse=not config().host_memory_reuse)


_PROGRAM = """
import ctypes, resource, threading, torch, xlanb
torch.ones(4, device="xla").sum().item()        # the setting is made, or not, at the first tensor
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
SIZE = 128 << 20

def temporary():            # what XLA's CPU client does on its worker threads: a large buffer, written, freed
    p = libc.malloc(SIZE)
    ctypes.memset(p, 1, SIZE)
    libc.free(p)

def run():
    t = threading.Thread(target=temporary)
    t.start()
    t.join()
run()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    run()
print(xlanb.runtime_state().host_memory, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 4)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
                    reason="mallopt is glibc's")
def test_a_threads_large_temporary_is_not_mapped_again_each_time(tmp_path):
    """In a fresh process on the CPU: with the setting, a 128 MiB buffer that a thread allocates, writes
    and frees again and again is served from the heap, whose pages stay; without it, glibc maps it afresh
    each time (past its mmap threshold) and the kernel faults in all 32,768 pages again. The pattern of
    XLA's CPU temporaries; how much of XLA's own memory takes it depends on the jaxlib (docs/config.md's
    W7 figure), so it is measured by the benchmarks, not here."""
    script = tmp_path / "run.py"
    script.write_text(_PROGRAM)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("XLANB_")}
    faults = {}
    for reuse in ("1", "0"):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                              env={**environ, "XLANB_PLATFORM": "cpu", "XLANB_HOST_MEMORY_REUSE": reuse,
                                   "XLANB_PERSISTENT_CACHE": "0"})
        assert done.returncode == 0, done.stderr[-2000:]
        tuned, count = done.stdout.split()[-2:]
        assert tuned == ("True" if reuse == "1" else "False")
        faults[reuse] = int(count)
    if faults["0"] == 0:      # a sandboxed kernel (the TPU VM of docs/portability.md) counts none
        pytest.skip(f"the kernel reports no page faults here (getrusage's ru_minflt: {faults}): nothing to count them by")
    pages = (128 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert faults["0"] >= pages // 2 and faults["1"] <= pages // 16, (faults, pages)


def test_an_accelerator_platform_is_never_set(monkeypatch):
    from jax._src import xla_bridge
    monkeypatch.setattr(xla_bridge, "backends_are_initialized", lambda: False)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert state.cpu_only("cpu") is True
    assert state.cpu_only("tpu") is False and state.cpu_only("gpu") is False    # whatever JAX_PLATFORMS says
