"""`xmp.spawn(fn, args, nprocs)` and `torch_xla.launch(fn, args)`: replication over processes.

nprocs=1 calls `fn(0, *args)` in this process, as torch_xla does. nprocs=None (torch_xla.launch's
default) means one replica per device, which torch_xla counts from CPU_NUM_DEVICES on the CPU
(device threads in one process there): one process, or CPU_NUM_DEVICES processes when it is set.
For N > 1 replicas (nprocs=N, which torch_xla refuses, asks for them directly), N fresh Python
processes start (`python -m xlanb.compat.spawn_worker`); each installs the compat layer, joins one
jax.distributed cluster (gloo collectives on the CPU) with one device of its own, imports the main
script as `__mp_main__` (as multiprocessing's spawn does, so `fn` and what it uses resolve by name),
and calls `fn(ordinal, *args)` (after the `worker_setup` calls a runner registered, e.g. the
referee's example sizes). `xr.world_size()` is then N and `xm.all_reduce` / `optimizer_step`
reduce across the processes (collectives.py).
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time

from xlanb.compat import devices


# (function, args) each spawned replica calls after installing the compat layer and before importing
# the main script: the process-wide setup a runner did in this process (tools/torch_xla_referee.py's sizes)
worker_setup: list = []


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


def _wait(procs, logs, grace_s: float = 10.0) -> list[str]:
    """Waits for every replica; once one fails, the others get `grace_s` to finish (a replica
    waiting in a collective for the failed one never would) and are then stopped. Returns the
    failures, each with the end of its stderr; the others' stderr is passed on."""
    failed_at = None
    while True:
        codes = [p.poll() for p in procs]
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = time.monotonic()
        if all(c is not None for c in codes) or (failed_at is not None and time.monotonic() - failed_at > grace_s):
            break
        time.sleep(0.05)
    failures = []
    for rank, (p, log) in enumerate(zip(procs, logs)):
        log.seek(0)
        err = log.read()
        if p.poll() is None:
            failures.append(f"process {rank} was stopped after another process failed")
        elif p.returncode != 0:
            failures.append(f"process {rank} exited with code {p.returncode}:\n{err[-4000:]}")
        elif err:
            sys.stderr.write(err)
    failures.sort(key=lambda f: "was stopped" in f)        # the failures that caused the stop first
    return failures


def spawn(fn, args: tuple = (), nprocs: int | None = None, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """Runs `fn(ordinal, *args)` in `nprocs` replicas (see the module docstring); returns None."""
    del daemon, start_method
    if nprocs is None:
        nprocs = int(os.environ.get("CPU_NUM_DEVICES", "1"))
    if nprocs == 1:
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
                         "port": port, "setup": list(worker_setup)}, f)
            pickle.dump((fn, tuple(args)), f)
        logs = [open(os.path.join(tmp, f"stderr_{rank}.txt"), "w+") for rank in range(nprocs)]
        procs = [subprocess.Popen([sys.executable, "-m", "xlanb.compat.spawn_worker", payload, str(rank)],
                                  env=_worker_env(), stderr=logs[rank]) for rank in range(nprocs)]
        try:
            failures = _wait(procs, logs)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for log in logs:
                log.close()
        if failures:
            raise ProcessExitedException("xmp.spawn: " + "\n".join(failures))
    return None


def launch(fn, args: tuple = (), start_method: str = "spawn", debug_single_process: bool = False):
    """`torch_xla.launch`: `xmp.spawn` with torch_xla's default replica count (see the module docstring)."""
    return spawn(fn, args=args, nprocs=1 if debug_single_process else None, start_method=start_method)
