"""tools/tests_on_device.py: a test that ends the process is recorded as aborted, and pytest goes on
past it; the outcomes of the others are kept, with the head and the tail of a long error."""

import pathlib
import subprocess
import sys

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "tests_on_device.py"


def test_an_abort_is_recorded_and_the_run_goes_on(tmp_path):
    (tmp_path / "test_some.py").write_text(
        "import os\n"
        "def test_a(): pass\n"
        "def test_b(): os.abort()\n"
        "def test_c(): assert 1 == 2\n"
        "def test_d(): pass\n"
        "def test_e(): raise RuntimeError('what XLA said' + ' here' * 400 + ' where it was raised')\n")
    done = subprocess.run([sys.executable, str(TOOL), "--results", str(tmp_path / "out"), "--seconds", "120",
                           "test_some.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    rows = [line.split("\t") for line in (tmp_path / "out" / "done.txt").read_text().splitlines()]
    assert [(r[0], r[1]) for r in rows] == [("test_some.py::test_a", "passed"), ("test_some.py::test_b", "aborted"),
                                            ("test_some.py::test_c", "failed"), ("test_some.py::test_d", "passed"),
                                            ("test_some.py::test_e", "failed")]
    assert "Aborted" in rows[1][2] and "assert 1 == 2" in rows[2][2]
    assert "what XLA said" in rows[4][2] and rows[4][2].endswith("where it was raised") and len(rows[4][2]) < 1000
    assert done.stdout.splitlines()[0] == "1 aborted, 2 failed, 2 passed"
