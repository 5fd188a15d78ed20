"""Two processes on this machine, 4 CPU devices each, one mesh of 8 over jax.distributed (gloo
collectives): data-parallel training over the global devices matches one device."""

import json
import socket
import subprocess
import sys

from spmd_programs import PROGRAMS, ROOT, program_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_train_data_parallel_over_8_global_devices():
    port = str(_free_port())
    env = program_env(devices=4)
    procs = [subprocess.Popen([sys.executable, str(PROGRAMS / "multihost.py"), str(i), port], env=env, cwd=str(ROOT),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, f"process failed:\n{out[-3000:]}\n{err[-5000:]}"
            results.append(json.loads([line for line in out.splitlines() if line.startswith("RESULT ")][-1][7:]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [r["process"] for r in results] == [0, 1]
    for r in results:
        assert r["processes"] == 2 and r["devices"] == 8 and r["local_devices"] == 4 and r["mesh"] == 8
        assert r["loss_diff"] <= 1e-5 and r["param_diff"] <= 1e-5
        assert r["batch_spec"] == "('data', None) on mesh data=8"
        assert r["gathered"] and r["spread_spec"] == "('data', None) on mesh data=8"
    assert results[0]["losses"] == results[1]["losses"]
