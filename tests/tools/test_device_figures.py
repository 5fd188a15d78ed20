"""tools/device_figures.py (the accelerator figures of docs/portability.md and docs/debugging.md) runs
here too: each section's numbers are there and hold on the CPU, a section that raises is recorded
while the others run, and an unknown section is refused."""

import json
import pathlib
import subprocess
import sys

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "device_figures.py"


def run(tmp_path, *args):
    return subprocess.run([sys.executable, str(TOOL), "--out", str(tmp_path), "--size", "256", *args],
                          capture_output=True, text=True, timeout=600)


def test_the_sections_measure_on_this_platform(tmp_path):
    done = run(tmp_path, "precision", "accuracy", "debug_nans", "first_step")
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "device_figures.json").read_text())
    assert found["precision"]["highest"]["mm"] < 1e-6 and found["precision"]["cpu"]["mm"] < 1e-6
    assert found["precision"]["highest"]["mm256_ms"] > 0
    xla, cpu = found["accuracy"]["exp.float32"]
    assert 0 < cpu < 1e-6 and xla < 1e-5
    assert len(found["accuracy"]) == 30
    assert found["debug_nans"]["raised"].startswith("NaN produced by aten.sqrt.default at device_figures.py:")
    (graph,) = found["first_step"]["graphs"]
    assert graph["ops"] > 500 and 0 < graph["compile_s"] < found["first_step"]["first_step_s"]
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["precision", "accuracy", "debug_nans",
                                                                     "first_step"]


def test_an_unknown_section_is_refused(tmp_path):
    done = run(tmp_path, "precison")
    assert done.returncode == 2 and "unknown section 'precison'" in done.stderr


def test_compare_and_decode_sections(tmp_path):
    import pytest
    pytest.importorskip("transformers", reason="transformers (requirements-dev.txt) is not installed")
    done = run(tmp_path, "compare", "decode")
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "device_figures.json").read_text())
    highest = found["compare"]["highest"]
    assert highest["ok"] and highest["first"] is None and highest["statuses"]["introduced"] == 0
    assert highest["compare_s"] > highest["plain_s"] > 0
    assert set(found["compare"]) == {"highest", "highest, torch's defaults", "high", "medium"}
    for arch in ("gpt2", "llama"):
        short, long = found["decode"][f"{arch} 4 tokens"], found["decode"][f"{arch} 16 tokens"]
        assert short["same tokens"] and long["same tokens"]
        assert short["compiles"] == long["compiles"]          # a static cache: a fixed set of graphs
