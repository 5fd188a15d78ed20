"""tools/torch_suites.py runs device-generic test files (instantiate_device_type_tests) on xla only
and counts per file; checked on a tiny file of that kind written here (PyTorch's own files are
not part of the project)."""

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TINY = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_device_type import instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase, run_tests


    class TestTiny(TestCase):
        def test_add(self, device):
            self.assertEqual(torch.device(device).type, "xla")
            self.assertEqual((torch.ones(3, device=device) + 1).cpu(), torch.full((3,), 2.0))

        def test_wrong(self, device):
            self.assertEqual(torch.ones(2, device=device).sum().item(), 3.0)

        def test_on_cpu_only(self, device):
            self.assertEqual(torch.device(device).type, "cpu")


    instantiate_device_type_tests(TestTiny, globals())

    if __name__ == "__main__":
        run_tests()
''')


def test_runner_instantiates_xla_only_and_counts_per_file(tmp_path):
    (tmp_path / "test_tiny.py").write_text(TINY)
    report = tmp_path / "out.md"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "torch_suites.py"), "--tests", str(tmp_path),
                           "test_tiny.py", "--report", str(report)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr          # two tests fail
    counts = json.loads(report.with_suffix(".json").read_text())["test_tiny.py"]
    assert (counts["run"], counts["passed"], counts["failed"]) == (3, 1, 2)
    failed = sorted(counts["failed_tests"])
    assert failed[0].startswith("TestTinyPRIVATEUSE1.test_on_cpu_only_xla")
    assert failed[1].startswith("TestTinyPRIVATEUSE1.test_wrong_xla")
    assert counts["fails_on_cpu_too"] == [failed[1]]                # its CPU twin fails as well; the other passes
    text = report.read_text()
    assert "| test_tiny.py | 3 | 1 | 2 | 0 |" in text
    assert f"- {failed[1]} **(fails on CPU too)**" in text and f"- {failed[0]}\n" in text


def test_a_sample_runs_that_many_tests_drawn_after_k(tmp_path):
    """--sample N runs N of the tests -k leaves (drawn with --seed), and the report says of how many."""
    (tmp_path / "test_tiny.py").write_text(TINY)
    report = tmp_path / "out.md"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "torch_suites.py"), "--tests", str(tmp_path),
                           "test_tiny.py", "--report", str(report), "-k", "add or wrong", "--sample", "1", "--seed",
                           "3", "--no-cpu-twins"], capture_output=True, text=True, timeout=600)
    counts = json.loads(report.with_suffix(".json").read_text())["test_tiny.py"]
    assert (counts["run"], counts["sampled_from"]) == (1, 2), proc.stdout + proc.stderr
    assert counts["failed"] == (1 if counts["failed_tests"] else 0)
    assert all("on_cpu_only" not in t for t in counts["failed_tests"])
    assert "| test_tiny.py (a sample of 2) | 1 |" in report.read_text()
