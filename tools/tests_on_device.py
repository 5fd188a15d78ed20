"""The tests on an accelerator machine (a TPU VM, a GPU box), where XLA's compiler can end the process.

    python tools/tests_on_device.py [--results DIR] [--seconds N] [pytest paths and options ...]

One pytest process at a time (one process holds a TPU chip). Each test's outcome goes to
DIR/done.txt as it finishes (nodeid, outcome, the error's `E` lines); when a test ends the process
(XLA:TPU's compiler aborts on some programs: docs/portability.md#on-a-tpu), it is recorded as
`aborted` with the fatal line from the log, and pytest starts again past every test done, until
the paths are run through or the time is up. The counts per outcome and every test that did not
pass are printed at the end. Tests that start a second Python process fail there while this one
holds the chip; tests of torch.compile's entry point need xlanb installed, not on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import subprocess
import sys
import time

_FATAL = re.compile(r"Fatal Python error|Check failed|terminate called|Segmentation fault")


# -- the pytest plugin (this file, loaded with -p in each pytest process) ----------------------------

def _results() -> pathlib.Path:
    return pathlib.Path(os.environ["XLANB_DEVICE_TESTS"])


def pytest_collection_modifyitems(session, config, items):
    done = _done_ids(_results())
    items[:] = [item for item in items if item.nodeid not in done]


def pytest_runtest_logstart(nodeid, location):
    (_results() / "current.txt").write_text(nodeid)


def pytest_runtest_logreport(report):
    if report.when != "call" and report.outcome == "passed":
        return
    outcome = report.outcome if report.when == "call" or report.outcome == "skipped" else f"{report.outcome} in {report.when}"
    error = ""
    if report.outcome == "failed":
        lines = [line.strip() for line in str(report.longrepr).splitlines() if line.startswith("E ")]
        error = " | ".join(lines)
        if len(error) > 900:            # the head names the error (XLA's first line), the tail where it was raised
            error = f"{error[:450]} ... {error[-450:]}"
    with open(_results() / "done.txt", "a") as f:
        f.write(f"{report.nodeid}\t{outcome}\t{error}\n")


# -- the driver ----------------------------------------------------------------------------------------

def _done_ids(results: pathlib.Path) -> set:
    path = results / "done.txt"
    return {line.split("\t")[0] for line in path.read_text().splitlines()} if path.exists() else set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="device-tests", help="folder for done.txt and the last log")
    parser.add_argument("--seconds", type=float, default=3600, help="stop starting pytest after this long")
    args, pytest_args = parser.parse_known_args()
    results = pathlib.Path(args.results).resolve()
    results.mkdir(parents=True, exist_ok=True)
    here = pathlib.Path(__file__).resolve().parent
    env = {**os.environ, "XLANB_DEVICE_TESTS": str(results),
           "PYTHONPATH": os.pathsep.join([str(here)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        (results / "current.txt").unlink(missing_ok=True)
        log = results / "last_log.txt"
        with open(log, "w") as out:
            try:
                rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                                     "tests_on_device", *pytest_args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                    timeout=max(1.0, deadline - time.monotonic())).returncode
            except subprocess.TimeoutExpired:
                print(f"time is up ({args.seconds:.0f} s)")
                break
        current = results / "current.txt"
        if rc >= 0 or not current.exists():       # pytest ended by itself (or before any test)
            break
        nodeid = current.read_text()
        if nodeid not in _done_ids(results):
            fatal = next((line.strip() for line in log.read_text(errors="replace").splitlines()
                          if _FATAL.search(line)), f"signal {-rc}")
            with open(results / "done.txt", "a") as f:
                f.write(f"{nodeid}\taborted\t{fatal[:300]}\n")
        time.sleep(5)           # a TPU can refuse a program started just after another ended
    lines = (results / "done.txt").read_text().splitlines() if (results / "done.txt").exists() else []
    counts = collections.Counter(line.split("\t")[1] for line in lines)
    print(", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "no test ran")
    for line in lines:
        if line.split("\t")[1] not in ("passed", "skipped"):
            print(line)
    return 0 if set(counts) <= {"passed", "skipped"} else 1


if __name__ == "__main__":
    sys.exit(main())
