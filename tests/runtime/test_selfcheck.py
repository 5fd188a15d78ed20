"""`python -m xlanb.selfcheck`: every row passes on this machine, a failing row says what to do and
makes the exit code 1, a check that raises is an ERROR row and the others still run."""

import json
import subprocess
import sys

import jax
import pytest
import torch

import xlanb
from xlanb import selfcheck
from xlanb.selfcheck import workloads
from xlanb.state import runtime_state

ROWS = ["versions", "devices", "training parity", "eager op", "replayed step", "HF greedy tokens", "W3 step",
        "W4 step", "device memory"]


def has_transformers() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def test_every_row_passes_in_a_fresh_process():
    """Every correctness row passes. A speed row measures time on whatever machine runs the tests, so it
    may FAIL on a loaded or slow one: then only for its ratio (the step replayed, no op fell back to the
    CPU), and the exit code says so; the test does not depend on the machine's speed."""
    done = subprocess.run([sys.executable, "-m", "xlanb.selfcheck", "--json"], capture_output=True, text=True,
                          timeout=300)
    report = json.loads(done.stdout)
    rows = {r["check"]: r for r in report["rows"]}
    assert list(rows) == ROWS
    platform = jax.devices()[0].platform
    if rows["devices"]["data"]["platform"] != platform:
        pytest.skip(f"the fresh process found {rows['devices']['data']['platform']}, not this process's {platform}: "
                    "an accelerator held by this process (one process holds a TPU chip) is not the child's")
    for name, row in rows.items():
        if name == "HF greedy tokens" and not has_transformers():
            assert row["status"] == "SKIP" and "pip install transformers" in row["detail"]
        elif name == "device memory" and platform == "cpu":
            assert row["status"] == "SKIP" and row["detail"] == "not reported by the CPU backend"
        elif name in ("W3 step", "W4 step"):
            data = row["data"]
            assert data["replayed"] > 0 and data["fallbacks"] == [] and data["xlanb_ms"] > 0 and data["jax_ms"] > 0
            assert row["status"] == ("PASS" if data["ratio"] <= selfcheck.RATIO_LIMIT else "FAIL"), row
            if row["status"] == "FAIL":
                assert row["advice"].startswith(f"xlanb's step takes {data['ratio']:.2f}x JAX's"), row
        else:
            assert row["status"] == "PASS", row
    passed = all(r["status"] in ("PASS", "SKIP") for r in rows.values())
    assert (done.returncode, report["ok"]) == ((0, True) if passed else (1, False)), done.stderr[-3000:]
    assert rows["replayed step"]["data"]["replayed"] == 3 and rows["replayed step"]["data"]["replay_hits"] == 3
    if platform == "cpu":
        assert "seq 64, batch 4" in rows["W4 step"]["detail"]              # --quick is the CPU's default
        assert any(line.startswith("devices (PASS): JAX found no GPU/TPU") for line in report["advice"])


def cheap(monkeypatch, *names):
    """Only the named checks run (the slow ones are tested by the subprocess above)."""
    monkeypatch.setattr(selfcheck, "CHECKS", [(n, f) for n, f in selfcheck.CHECKS if n in names])


def test_a_parity_failure_is_a_fail_row_with_what_to_do_and_exit_code_1(monkeypatch, capsys):
    real = workloads.sgd_step

    def off_on_xla(model, lr=0.1):          # the xla model learns a little faster than the CPU one
        return real(model, lr * 1.01 if next(model.parameters()).device.type == "xla" else lr)
    monkeypatch.setattr(workloads, "sgd_step", off_on_xla)
    cheap(monkeypatch, "versions", "training parity", "device memory")
    assert selfcheck.main([]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["check", "result", "detail"]
    (row,) = [line for line in lines if line.startswith("training parity ")]
    assert row.split()[2] == "FAIL" and "(tolerance 1e-04)" in row
    (advice,) = [line for line in lines if line.startswith("- training parity (FAIL): ")]
    assert "float32 matmul precision" in advice and "XLANB_DEBUG=3 prints each graph's IR" in advice
    assert out.rstrip().endswith("something is wrong (above)")


def test_a_check_that_raises_is_an_error_row_and_the_others_still_run(monkeypatch, capsys):
    def broken(quick):
        raise ValueError("no such thing\nsecond line")
    monkeypatch.setattr(selfcheck, "CHECKS", [("versions", selfcheck.check_versions), ("broken", broken),
                                              ("eager op", selfcheck.check_eager_op)])
    rows = selfcheck.run()
    assert [(r.check, r.status) for r in rows] == [("versions", "PASS"), ("broken", "ERROR"), ("eager op", "PASS")]
    assert rows[1].detail == "ValueError: no such thing" and "--traceback" in rows[1].advice
    assert selfcheck.main(["--json", "--traceback"]) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["ok"] is False and report["advice"][0].startswith("broken (ERROR): this check raised")
    assert 'raise ValueError("no such thing' in captured.err


def test_the_checks_leave_the_mode_and_torchs_random_state_as_they_were(monkeypatch):
    cheap(monkeypatch, "training parity", "eager op")
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    with xlanb.eager_mode_context(True):
        assert selfcheck.ok(selfcheck.run())
        assert xlanb.is_eager_mode()
    assert torch.equal(torch.rand(3), expected)


def test_the_table_aligns_its_columns():
    rows = [selfcheck.Row("a", "PASS", "one"), selfcheck.Row("longer name", "SKIP", "two", "do this")]
    text = selfcheck.render_text(rows, 1.25)
    assert text.splitlines()[:4] == ["check        result  detail", "-----------  ------  ------",
                                     "a            PASS    one", "longer name  SKIP    two"]
    assert "- longer name (SKIP): do this" in text
    assert text.endswith("xlanb selfcheck: 1 PASS, 1 SKIP in 1.2 s: OK")


@pytest.mark.parametrize("argv", [["--quick", "--full"], ["--bogus"]])
def test_bad_arguments_exit_with_usage(argv):
    with pytest.raises(SystemExit) as exit:
        selfcheck.main(argv)
    assert exit.value.code == 2


def test_device_memory_reads_the_devices_memory_stats(monkeypatch):
    class Device:                    # a GPU as JAX describes one: memory_stats() has numbers
        platform = "gpu"

        def memory_stats(self):
            return {"bytes_in_use": 3 << 30, "bytes_limit": 12 << 30, "peak_bytes_in_use": 4 << 30}
    monkeypatch.setattr(runtime_state(), "jax_device", Device)
    row = selfcheck.check_memory(quick=False)
    assert row.status == "PASS" and row.data["bytes_limit"] == 12 << 30
    assert row.detail == "3.0 GiB in use of 12.0 GiB (25.0%), peak 4.0 GiB (JAX's memory_stats())"
