"""Runs PyTorch's device-generic test files (those built with `instantiate_device_type_tests`) on
xla and writes per-file counts: PyTorch's own tests as the referee (issue 23).

The files are PyTorch's, so they are not part of this project: pass the folder that holds them
(a pytorch checkout's test/, or copies of single files near the installed torch's version).
Only the `xla` variants are instantiated (PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1); a pytest
plugin imports xlanb before each test module.

    python tools/torch_suites.py --tests DIR [FILE.py ...] [--report torch_suites.md] [-k EXPR] [--no-cpu-twins]
                                 [--sample N --seed S]

Each test that fails on xla is then run once more as its CPU twin (the same test instantiated for
`cpu`, without xlanb): one that fails on CPU too is the file's fault (a copy older than the
installed torch), not xlanb's, and the report marks it "fails on CPU too".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

DEFAULT_FILES = ("test_view_ops.py", "test_indexing.py", "test_shape_ops.py", "test_type_promotion.py",
                 "test_reductions.py")

PLUGIN = '''"""Imports xlanb before PyTorch's test modules, so `xla` is a PrivateUse1 device they test."""
import xlanb  # noqa: F401
'''


def collect(path: Path, env: dict, args: list[str], timeout: int) -> tuple[list[str], str]:
    """The file's test ids as pytest collects them with `args` (-k among them), and the collection's
    error lines and last line: what to report when there are none (an import error, a -k that
    matches nothing)."""
    cmd = [sys.executable, "-m", "pytest", str(path), "-p", "xlanb_torch_suite", "--collect-only", "-q",
           "-p", "no:cacheprovider", "--rootdir", str(path.parent), "-c", os.devnull, *args]
    try:
        proc = subprocess.run(cmd, env=env, cwd=path.parent, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], f"collection timed out after {timeout} s"
    lines = proc.stdout.splitlines()
    ids = [line for line in lines if line.startswith(f"{path.name}::")]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    tail = (proc.stdout.strip() or proc.stderr.strip()).splitlines()[-1:]
    return ids, "; ".join(errors + tail)


def run_file(path: Path, plugin_dir: str, extra: list[str], timeout: int, select: tuple[str, ...] = (),
             sample: int = 0, seed: int = 0) -> dict:
    """One test file in its own pytest process: the tests `select` (-k EXPR) leaves, or `sample` of them
    drawn with `seed` (in file order, for a file of tens of thousands of cases); the counts come from
    its junit XML. A sample of nothing (no test collected) is not run: its summary says why."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "junit.xml")
        env = dict(os.environ, PYTORCH_TESTING_DEVICE_ONLY_FOR="privateuse1",
                   PYTHONPATH=os.pathsep.join(filter(None, [plugin_dir, os.environ.get("PYTHONPATH")])))
        targets, drawn = [str(path), *select], {}
        if sample:
            ids, why = collect(path, env, [*select, *extra], timeout)
            if not ids:
                return {"sampled_from": 0, "summary": why, "failed_tests": []}
            chosen = [ids[i] for i in sorted(random.Random(seed).sample(range(len(ids)), min(sample, len(ids))))]
            argfile = os.path.join(tmp, "tests.txt")
            Path(argfile).write_text("\n".join(chosen) + "\n")
            targets, drawn = [f"@{argfile}"], {"sampled_from": len(ids), "sampled": chosen}
        cmd = [sys.executable, "-m", "pytest", *targets, "-p", "xlanb_torch_suite", "-q", "-p", "no:cacheprovider",
               "--rootdir", str(path.parent), "-c", os.devnull, f"--junitxml={junit}", *extra]
        try:
            proc = subprocess.run(cmd, env=env, cwd=path.parent, capture_output=True, text=True, timeout=timeout)
            tail = proc.stdout.strip().splitlines()[-1:] or proc.stderr.strip().splitlines()[-1:]
        except subprocess.TimeoutExpired:
            tail = [f"timed out after {timeout} s"]
        counts = junit_counts(junit) if os.path.exists(junit) else {}
        counts.update(drawn)
        counts["summary"] = tail[0] if tail else ""
        counts["failed_tests"] = failed_tests(junit) if os.path.exists(junit) else []
        return counts


def cpu_twin(test: str) -> str:
    """'TestViewOpsPRIVATEUSE1.test_x_xla_float32' -> 'TestViewOpsCPU::test_x_cpu_float32' (a pytest node id part)."""
    cls, name = test.split(":", 1)[0].split(".", 1)
    for suffix in ("PRIVATEUSE1", "XLA"):
        if cls.endswith(suffix):
            cls = cls[: -len(suffix)] + "CPU"
    return f"{cls}::{name.replace('_xla', '_cpu', 1)}"


def failing_on_cpu(path: Path, tests: list[str], timeout: int) -> set[str]:
    """Of `tests` (failed on xla), those whose CPU twin fails too (run without xlanb)."""
    if not tests:
        return set()
    twins = {cpu_twin(t): t for t in tests}
    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "junit.xml")
        env = dict(os.environ, PYTORCH_TESTING_DEVICE_ONLY_FOR="cpu")
        cmd = [sys.executable, "-m", "pytest", *[f"{path}::{twin}" for twin in twins], "-q", "-p", "no:cacheprovider",
               "--rootdir", str(path.parent), "-c", os.devnull, f"--junitxml={junit}"]
        try:
            subprocess.run(cmd, env=env, cwd=path.parent, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return set()
        if not os.path.exists(junit):
            return set()
        failed = {f"{t.split(':', 1)[0].split('.')[0]}::{t.split(':', 1)[0].split('.', 1)[1]}"
                  for t in failed_tests(junit)}
    return {twins[twin] for twin in twins if twin in failed}


def junit_counts(junit: str) -> dict:
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests, failures, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    return {"run": tests - skipped, "passed": tests - skipped - failures - errors, "failed": failures + errors,
            "skipped": skipped}


def failed_tests(junit: str) -> list[str]:
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            message = (bad.get("message") or "").strip().splitlines()
            out.append(f"{case.get('classname', '').split('.')[-1]}.{case.get('name')}: "
                       f"{message[0][:200] if message else ''}")
    return out


def report(results: dict) -> str:
    lines = ["| file | run on xla | passed | failed | skipped |", "|---|---|---|---|---|"]
    for name, c in results.items():
        of = f" (a sample of {c['sampled_from']})" if "sampled_from" in c else ""
        lines.append(f"| {name}{of} | {c.get('run', '-')} | {c.get('passed', '-')} | {c.get('failed', '-')} | "
                     f"{c.get('skipped', '-')} |")
    for name, c in results.items():
        if "run" not in c:                  # no junit XML: a sample of nothing, a timeout, a crash
            lines += ["", f"## {name}", "", f"No counts: {c['summary']}"]
        elif c.get("failed_tests"):
            on_cpu = set(c.get("fails_on_cpu_too", ()))
            lines += ["", f"## {name}", ""] + [f"- {t}" + (" **(fails on CPU too)**" if t in on_cpu else "")
                                               for t in c["failed_tests"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", required=True, help="folder with PyTorch's test files")
    parser.add_argument("files", nargs="*", help=f"test files in it (default: {', '.join(DEFAULT_FILES)})")
    parser.add_argument("--report", default="torch_suites.md", help="markdown report to write (and .json)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per file")
    parser.add_argument("--test-timeout", type=int, default=1800,
                        help="seconds per test (with pytest-timeout installed; 0: none). A few tests run "
                             "thousands of distinct small programs, each an XLA compile: minutes on 2 cores")
    parser.add_argument("-k", dest="select", help="pytest -k expression")
    parser.add_argument("--no-cpu-twins", action="store_true", help="do not run failing tests' CPU twins")
    parser.add_argument("--sample", type=int, default=0,
                        help="run this many of each file's tests, drawn at random (after -k), not all of them")
    parser.add_argument("--seed", type=int, default=0, help="the sample's random seed")
    args = parser.parse_args(argv)
    folder = Path(args.tests).resolve()
    files = args.files or [f for f in DEFAULT_FILES if (folder / f).exists()]
    select = ("-k", args.select) if args.select else ()
    extra = []
    if args.test_timeout and importlib.util.find_spec("pytest_timeout") is not None:
        extra.append(f"--timeout={args.test_timeout}")
    results = {}
    with tempfile.TemporaryDirectory() as plugin_dir:
        Path(plugin_dir, "xlanb_torch_suite.py").write_text(PLUGIN)
        for name in files:
            results[name] = run_file(folder / name, plugin_dir, extra, args.timeout, select, args.sample, args.seed)
            c = results[name]
            if not args.no_cpu_twins:
                c["fails_on_cpu_too"] = sorted(failing_on_cpu(folder / name, c["failed_tests"], args.timeout))
            print(f"{name}: run {c.get('run', '-')}, passed {c.get('passed', '-')}, failed {c.get('failed', '-')}"
                  f", of which on CPU too {len(c.get('fails_on_cpu_too', []))} ({c['summary']})", flush=True)
    Path(args.report).write_text(report(results))
    Path(args.report).with_suffix(".json").write_text(json.dumps(results, indent=1))
    return 0 if all(c.get("failed", 1) == 0 for c in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
