"""`python tools/torch_xla_referee.py CHECKOUT`: torch_xla-style test files run against the compat layer,
one count line per file."""

import subprocess
import sys

from conftest import ROOT, clean_env

REFEREE = str(ROOT / "tools" / "torch_xla_referee.py")


def test_referee_counts_each_files_tests(tmp_path):
    test_dir = tmp_path / "test"
    test_dir.mkdir()
    (test_dir / "test_fake.py").write_text(
        "import unittest\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_device(self):\n        self.assertEqual(str(torch_xla.device()), 'xla:0')\n"
        "    def test_world(self):\n        self.assertEqual(xm.xrt_world_size(), 1)\n"
        "    def test_fails(self):\n        self.assertEqual(torch_xla.device_count(), 4)\n")
    proc = subprocess.run([sys.executable, REFEREE, str(tmp_path), "test/test_fake.py",
                           "test/missing.py"], env=clean_env(), cwd=str(ROOT), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["test/test_fake.py: 2 of 3 pass (1 failed, 0 errors, 0 skipped)",
                                        "test/missing.py: missing in the checkout", "all: 2 of 3 pass (67%)"]


def test_referee_refuses_a_directory_without_tests(tmp_path):
    proc = subprocess.run([sys.executable, REFEREE, str(tmp_path)], env=clean_env(),
                          cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "has no test/ directory; give a pytorch/xla checkout" in proc.stderr
