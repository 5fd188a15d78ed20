"""`make test-matrix`: xlanb's wheel installed next to other torch and jax releases, and a
representative subset of the tests run there, as a user meets it.

Each combination gets its own venv under build/matrix/<name> holding that torch and jax (PyPI
wheels: on Linux x86_64 torch's are CUDA builds, which run on a CPU), then `pip install`s the
wheel from dist/ (`make wheel`), which must leave that torch and jax as they are. The tests run
from a temporary folder with the installed package, never the source tree, on the path.

    python tools/test_matrix.py                      # oldest and newest (the CI pair)
    python tools/test_matrix.py --combo 3.11:2.11.0:0.10.2 --combo ...
    python tools/test_matrix.py --all                # every combination docs/portability.md lists
    python tools/test_matrix.py --subset full ...    # the whole subset of the issue table
    python tools/test_matrix.py --discard            # each venv removed once its tests ran (CI)

A summary line per combination is printed at the end, and build/matrix/summary.json keeps it.

Disk: a combination's venv takes 6 to 8 GB (torch's CUDA wheels and their nvidia packages). The
packages are installed one wheel per pip command, without pip's cache, so that the peak is the
venv and one download rather than the venv and every download of one command (7.8 GB measured for
torch 2.9's); `--discard` keeps at most one venv on disk at a time.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MATRIX = os.path.join(ROOT, "build", "matrix")

# (python, torch, jax). The first and the last are the CI pair: the oldest and newest supported.
OLDEST = ("3.11", "2.9.0", "0.10.2")
NEWEST = ("3.12", "2.15.0", "0.12.0.1")
ALL = [OLDEST, ("3.11", "2.10.0", "0.10.2"), ("3.11", "2.11.0", "0.10.2"), ("3.11", "2.12.0", "0.10.2"),
       ("3.11", "2.13.0", "0.10.2"), ("3.11", "2.14.1", "0.10.2"), ("3.12", "2.13.0", "0.12.0.1"), NEWEST,
       ("3.13", "2.15.0", "0.12.0.1")]

# What each run takes beside torch and jax: the test tools, the kernel for the notebook test,
# transformers for the HF model test (the newest that installs beside that torch), matplotlib for
# notebook 05
TEST_DEPS = ["pytest>=8", "pytest-timeout", "expecttest", "nbclient", "nbformat", "ipykernel", "transformers",
             "matplotlib"]

# The representative subset: the lazy core, the three modes and replay, the runtime, lowering
# rules, the torch.compile backend, one HF model, one notebook through a real kernel
SUBSETS = {
    "ci": ["tests/capture", "tests/modes", "tests/runtime", "tests/lower", "tests/dynamo", "tests/spmd",
           "tests/models/test_hf_models.py::test_three_adamw_steps_match_cpu[llama]",
           "tests/notebooks/test_notebooks.py::test_runs_top_to_bottom[01_lazy_tensors]"],
}
SUBSETS["full"] = SUBSETS["ci"][:6] + ["tests/models", "tests/notebooks", "tests/report", "tests/compat"]
SUBSETS["notebooks"] = ["tests/notebooks"]


def python_for(version: str) -> str:
    """A python<version> on PATH or in pyenv."""
    for cand in sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python"))):
        return cand         # pyenv's shims answer on PATH for versions that are not selected, then fail
    found = shutil.which(f"python{version}")
    if found:
        return found
    raise SystemExit(f"test-matrix: no Python {version} here (install it, or pyenv install {version})")


def pip_env() -> dict:
    """PyPI as it is: without a machine-wide pip config that caps torch's version."""
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_CONSTRAINT="", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


# What one combination's venv needs on disk at its peak (the largest, torch 2.9's, is 7.7 GB)
VENV_BYTES = 9 << 30


def venv_for(combo: tuple[str, str, str]) -> str:
    """build/matrix/py<py>-torch<t>-jax<j>, made once and kept; the test tools follow TEST_DEPS."""
    py, torch_v, jax_v = combo
    path = os.path.join(MATRIX, f"py{py}-torch{torch_v}-jax{jax_v}")
    stamp = os.path.join(path, ".matrix-stamp")
    made = json.loads(open(stamp).read()) if os.path.exists(stamp) else None
    vpy = os.path.join(path, "bin", "python")
    if made is None or made[0] != list(combo):
        shutil.rmtree(path, ignore_errors=True)
        check_disk(path)
        run([python_for(py), "-m", "venv", path])
        run([vpy, "-m", "pip", "install", "-q", "--no-cache-dir", "--upgrade", "pip"], env=pip_env())
        install_one_by_one(vpy, [f"torch=={torch_v}", f"jax=={jax_v}", f"jaxlib=={jaxlib_for(jax_v)}", *TEST_DEPS])
    elif made[1] != TEST_DEPS:
        install_one_by_one(vpy, TEST_DEPS)
    with open(stamp, "w") as f:
        f.write(json.dumps([list(combo), TEST_DEPS]))
    return path


def check_disk(path: str) -> None:
    free = shutil.disk_usage(MATRIX).free
    if free < VENV_BYTES:
        raise SystemExit(f"test-matrix: {free / 2**30:.1f} GB free where {path} goes; a combination's venv "
                         f"needs about {VENV_BYTES / 2**30:.0f} GB (torch's CUDA wheels). Remove other venvs "
                         f"under {MATRIX}, or run with --discard to keep one at a time.")


def install_one_by_one(vpy: str, requirements: list[str]) -> None:
    """What `pip install requirements` would install, resolved once (pip's dry run, which downloads
    the wheels to read them and frees them when it ends: about 4 GB for torch 2.9's, before the venv
    fills), then one wheel per command without pip's cache: pip keeps every download of a command
    until the command ends, 3 GB more beside the venv for torch's nvidia packages."""
    with tempfile.TemporaryDirectory(prefix="matrix-pip-") as tmp:
        report = os.path.join(tmp, "report.json")
        run([vpy, "-m", "pip", "install", "-q", "--no-cache-dir", "--dry-run", "--report", report, *requirements],
            env=pip_env())
        with open(report) as f:
            chosen = [p["metadata"] for p in json.load(f)["install"]]
    for meta in chosen:
        run([vpy, "-m", "pip", "install", "-q", "--no-cache-dir", "--no-deps", f"{meta['name']}=={meta['version']}"],
            env=pip_env())
    run([vpy, "-m", "pip", "check"], env=pip_env())


def jaxlib_for(jax_v: str) -> str:
    """jax 0.12.0.1 is a jax-only fix release: its jaxlib is 0.12.0."""
    parts = jax_v.split(".")
    return ".".join(parts[:3])


def installed(vpy: str) -> dict:
    code = ("import json, sys, torch, jax, jaxlib; print(json.dumps({'python': sys.version.split()[0], "
            "'torch': torch.__version__, 'jax': jax.__version__, 'jaxlib': jaxlib.__version__}))")
    out = subprocess.run([vpy, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def install_wheel(vpy: str, wheel: str) -> None:
    before = installed(vpy)
    run([vpy, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", wheel], env=pip_env())
    # its dependencies, resolved against what the venv holds (never a torch or jax change)
    run([vpy, "-m", "pip", "install", "-q", wheel], env=pip_env())
    after = installed(vpy)
    if (before["torch"], before["jax"]) != (after["torch"], after["jax"]):
        raise SystemExit(f"test-matrix: installing the wheel changed torch/jax: {before} -> {after}")


def run_tests(path: str, targets: list[str], workdir: str, extra: list[str]) -> dict:
    """pytest from a copy of tests/ in a temporary folder: the installed wheel is what imports."""
    vpy = os.path.join(path, "bin", "python")
    versions = installed(vpy)
    report = os.path.join(path, "junit.xml")
    cmd = [os.path.join(path, "bin", "pytest"), "-q", "-p", "no:cacheprovider", "--timeout", "900",
           f"--junitxml={report}", "-o", "addopts=", *targets, *extra]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    t0 = time.time()
    print("+", " ".join(cmd), f"(in {workdir})", flush=True)
    proc = subprocess.run(cmd, cwd=workdir, env=env)
    counts = junit_counts(report)
    return dict(versions, rc=proc.returncode, seconds=round(time.time() - t0), **counts)


def junit_counts(report: str) -> dict:
    import xml.etree.ElementTree as ET
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError):
        return {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "failures": []}
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = failed = skipped = 0
    failures = []
    for s in suites:
        for case in s.iter("testcase"):
            tests += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(f"{case.get('classname')}::{case.get('name')}")
            elif case.find("skipped") is not None:
                skipped += 1
    return {"tests": tests, "passed": tests - failed - skipped, "failed": failed, "skipped": skipped,
            "failures": failures}


def stage_tests(workdir: str) -> None:
    """tests/, notebooks/ and tools/ (the referee runners some tests drive) copied where the source
    package is not importable."""
    for name in ("tests", "notebooks", "tools"):
        shutil.copytree(os.path.join(ROOT, name), os.path.join(workdir, name),
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    with open(os.path.join(workdir, "pytest.ini"), "w") as f:
        f.write("[pytest]\ntestpaths = tests\n")


def parse_combo(text: str) -> tuple[str, str, str]:
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("a combination is PYTHON:TORCH:JAX, e.g. 3.11:2.9.0:0.10.2")
    return tuple(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--combo", action="append", type=parse_combo, default=[])
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--subset", choices=sorted(SUBSETS), default="ci")
    ap.add_argument("--wheel", help="the wheel to install (default: the one in dist/)")
    ap.add_argument("--discard", action="store_true", help="remove each venv once its tests ran (less disk)")
    ap.add_argument("pytest_args", nargs="*", help="passed to pytest after the subset (e.g. -k ..., -x)")
    args = ap.parse_args()
    combos = args.combo or (ALL if args.all else [OLDEST, NEWEST])
    wheel = args.wheel or next(iter(sorted(glob.glob(os.path.join(ROOT, "dist", "xlanb-*.whl")))), None)
    if not wheel:
        raise SystemExit("test-matrix: no wheel in dist/: run `make wheel` first")
    os.makedirs(MATRIX, exist_ok=True)
    results = []
    for combo in combos:
        path = venv_for(combo)
        install_wheel(os.path.join(path, "bin", "python"), wheel)
        with tempfile.TemporaryDirectory(prefix="matrix-tests-") as work:
            stage_tests(work)
            results.append(run_tests(path, SUBSETS[args.subset], work, args.pytest_args))
        if args.discard:
            shutil.rmtree(path, ignore_errors=True)
    with open(os.path.join(MATRIX, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("\ntest-matrix:")
    for r in results:
        print(f"  Python {r['python']}, torch {r['torch']}, jax {r['jax']}: {r['passed']} passed, "
              f"{r['failed']} failed, {r['skipped']} skipped in {r['seconds']} s")
        for name in r["failures"]:
            print(f"    FAILED {name}")
    total_failed = sum(r["failed"] for r in results)
    bad_rc = [r for r in results if r["rc"] not in (0, 1)]
    print(f"{sum(r['passed'] for r in results)} passed, {total_failed} failed, "
          f"{sum(r['skipped'] for r in results)} skipped")
    return 1 if total_failed or bad_rc else 0


if __name__ == "__main__":
    sys.exit(main())
