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


def run_on_tiny(tmp_path, *args):
    """Runs the tool on TINY (as test_tiny.py in tmp_path) with `args`; returns the process, the
    file's counts from the JSON report and the markdown report."""
    (tmp_path / "test_tiny.py").write_text(TINY)
    report = tmp_path / "out.md"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "torch_suites.py"), "--tests", str(tmp_path),
                           "test_tiny.py", "--report", str(report), *args], capture_output=True, text=True, timeout=600)
    assert report.exists(), proc.stdout + proc.stderr
    return proc, json.loads(report.with_suffix(".json").read_text())["test_tiny.py"], report.read_text()


def test_runner_instantiates_xla_only_and_counts_per_file(tmp_path):
    proc, counts, text = run_on_tiny(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr          # two tests fail
    assert (counts["run"], counts["passed"], counts["failed"]) == (3, 1, 2)
    failed = sorted(counts["failed_tests"])
    assert failed[0].startswith("TestTinyPRIVATEUSE1.test_on_cpu_only_xla")
    assert failed[1].startswith("TestTinyPRIVATEUSE1.test_wrong_xla")
    assert counts["fails_on_cpu_too"] == [failed[1]]                # its CPU twin fails as well; the other passes
    assert "| test_tiny.py | 3 | 1 | 2 | 0 |" in text
    assert f"- {failed[1]} **(fails on CPU too)**" in text and f"- {failed[0]}\n" in text


def test_a_sample_runs_that_many_tests_drawn_after_k(tmp_path):
    """--sample N runs N of the tests -k leaves (drawn with --seed: seed 0 draws the second of the two),
    and the report says which and of how many."""
    proc, counts, text = run_on_tiny(tmp_path, "-k", "add or wrong", "--sample", "1", "--seed", "0", "--no-cpu-twins")
    assert counts["sampled"] == ["test_tiny.py::TestTinyPRIVATEUSE1::test_wrong_xla"], proc.stdout + proc.stderr
    assert (counts["sampled_from"], counts["run"], counts["passed"], counts["failed"]) == (2, 1, 0, 1)
    assert [t.split(":")[0] for t in counts["failed_tests"]] == ["TestTinyPRIVATEUSE1.test_wrong_xla"]
    assert "| test_tiny.py (a sample of 2) | 1 | 0 | 1 | 0 |" in text


def test_a_sample_of_a_k_that_matches_nothing_runs_nothing_and_says_so(tmp_path):
    """An empty sample is not run (an empty list of tests would make pytest run the whole folder): the
    file has no counts, its summary is pytest's collection result, and the run fails."""
    proc, counts, text = run_on_tiny(tmp_path, "-k", "no_such_test", "--sample", "5", "--no-cpu-twins")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert counts["sampled_from"] == 0 and "run" not in counts and counts["failed_tests"] == []
    assert "no tests collected" in counts["summary"] and "deselected" in counts["summary"]
    assert "| test_tiny.py (a sample of 0) | - | - | - | - |" in text
    assert f"No counts: {counts['summary']}" in text
