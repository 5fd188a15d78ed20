"""The compat tests install torch_xla's names for the test and take them out after it, so the rest
of the suite never sees a `torch_xla` module."""

import os
import subprocess
import sys
import pathlib

import pytest

import xlanb.compat

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAMS = pathlib.Path(__file__).parent / "programs"


@pytest.fixture
def compat():
    xlanb.compat.install()
    yield
    xlanb.compat.uninstall()


def clean_env(devices: int | None = None) -> dict:
    """The environment for a subprocess: xlanb's defaults, the repo on sys.path, `devices` CPU devices."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLANB_")}
    env.pop("XLA_FLAGS", None)
    if devices is not None:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_python(*args: str, devices: int | None = None, env_extra: dict | None = None, timeout: int = 300):
    """`python args...` in a subprocess from the repository root; returns the CompletedProcess."""
    env = clean_env(devices)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], env=env, cwd=str(ROOT), capture_output=True, text=True,
                          timeout=timeout)


def result_of(proc) -> dict:
    """The JSON on the last `RESULT ` line a program printed (failing with its output otherwise)."""
    import json
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no RESULT line:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])
