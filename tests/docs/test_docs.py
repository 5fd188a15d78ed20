"""Every code block in docs/ marked runnable (```{.python .runnable}) runs without error.

Blocks of one page run in order in one fresh interpreter, as a reader would run them.
"""

import pathlib
import re
import subprocess
import sys

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
RUNNABLE = re.compile(r"```\{\.python \.runnable\}\n(.*?)```", re.S)
PAGES = sorted(p for p in DOCS.glob("*.md") if RUNNABLE.search(p.read_text()))


def test_some_pages_have_runnable_blocks():
    assert PAGES, "no runnable code blocks found in docs/"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_runnable_blocks_run(page, tmp_path):
    code = "\n\n".join(RUNNABLE.findall(page.read_text()))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                            cwd=tmp_path)
    assert result.returncode == 0, f"{page.name}:\n{result.stderr[-4000:]}"


def test_site_builds_strictly(tmp_path):
    """`make docs`: every page in the nav exists and every internal link resolves (no warnings)."""
    root = DOCS.parent
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                            capture_output=True, text=True, cwd=root, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
