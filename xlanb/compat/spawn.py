"""`xmp.spawn(fn, args, nprocs)` and `torch_xla.launch(fn, args)`: replication over processes.

nprocs=1 (or None) calls `fn(0, *args)` in this process, as torch_xla does for one device. For
nprocs=N > 1, N fresh Python processes start (`python -m xlanb.compat.spawn_worker`); each installs
the compat layer, joins one jax.distributed cluster (gloo collectives on the CPU) with one device
of its own, imports the main script as `__mp_main__` (as multiprocessing's spawn does, so `fn` and
what it uses resolve by name), and calls `fn(ordinal, *args)`. `xr.world_size()` is then N and
`xm.all_reduce` / `optimizer_step` reduce across the processes (collectives.py).
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import tempfile

from xlanb.compat import devices


class ProcessExitedException(RuntimeError):
    """A spawned replica failed; the message carries its exit code and the end of its output."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _main_module() -> dict:
    """How a worker finds the parent's `__main__`: a file path or a module name."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name not in ("__main__", "xlanb.compat.__main__"):
        return {"module": spec.name}
    path = getattr(main, "__file__", None)
    if path is None:
        raise RuntimeError("xmp.spawn(nprocs>1) needs the function to be defined in a script or module file "
                           "(each process imports it by name); in a notebook, put it in a .py file and import it")
    return {"path": os.path.abspath(path)}


def _worker_env() -> dict:
    """The parent's environment, with one CPU device per process (each replica is one device)."""
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags + ["--xla_force_host_platform_device_count=1"])
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    return env


def spawn(fn, args: tuple = (), nprocs: int | None = None, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """Runs `fn(ordinal, *args)` in `nprocs` replicas (see the module docstring); returns None."""
    del daemon, start_method
    if nprocs is None or nprocs == 1:
        fn(0, *args)
        return None
    if not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"xmp.spawn: nprocs must be a positive int or None, got {nprocs!r}")
    if not join:
        raise NotImplementedError("xmp.spawn(join=False) is not supported by xlanb.compat")
    if devices.world_size() > 1:
        raise RuntimeError("xmp.spawn called inside a spawned replica")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="xlanb_spawn_") as tmp:
        payload = os.path.join(tmp, "payload.pkl")
        with open(payload, "wb") as f:
            # two pickles: plain fields first (read before the main module is imported), then fn and args
            pickle.dump({"main": _main_module(), "argv": list(sys.argv), "cwd": os.getcwd(), "nprocs": nprocs,
                         "port": port}, f)
            pickle.dump((fn, tuple(args)), f)
        procs = [subprocess.Popen([sys.executable, "-m", "xlanb.compat.spawn_worker", payload, str(rank)],
                                  env=_worker_env(), stdout=None if rank == 0 else subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for rank in range(nprocs)]
        failures = []
        try:
            for rank, p in enumerate(procs):
                _, err = p.communicate()
                if p.returncode != 0:
                    failures.append(f"process {rank} exited with code {p.returncode}:\n{err[-4000:]}")
                elif err:
                    sys.stderr.write(err)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        if failures:
            raise ProcessExitedException("xmp.spawn: " + "\n".join(failures))
    return None


def launch(fn, args: tuple = (), start_method: str = "spawn", debug_single_process: bool = False):
    """`torch_xla.launch`: `xmp.spawn` with torch_xla's default process count (one here: see spawn)."""
    return spawn(fn, args=args, nprocs=1 if debug_single_process else None, start_method=start_method)
