"""The multi-device tests run their programs in a subprocess: XLA_FLAGS must give the CPU 8 devices
before jax starts, and the main test process keeps its one device."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

PROGRAMS = pathlib.Path(__file__).parent / "programs"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def program_env(devices: int = 8) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLANB_")}    # the defaults, whatever ran before
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(PROGRAMS)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_program(name: str, *args: str, devices: int = 8, timeout: int = 300) -> dict:
    """Runs tests/spmd/programs/<name>.py and returns the JSON it prints on its `RESULT` line."""
    proc = subprocess.run([sys.executable, str(PROGRAMS / f"{name}.py"), *args], env=program_env(devices),
                          capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    if proc.returncode != 0:
        pytest.fail(f"{name}.py failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"{name}.py printed no RESULT line:\n{proc.stdout[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])
