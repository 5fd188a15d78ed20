"""`import xlanb` (and the report module) work in a process where IPython cannot be imported."""

import subprocess
import sys
import textwrap


def test_import_and_report_without_ipython():
    code = textwrap.dedent("""
        import sys
        for name in ("IPython", "ipywidgets", "anywidget", "ipykernel"):
            sys.modules[name] = None          # `import IPython` now raises ImportError
        import torch, xlanb
        from xlanb.report import build_report, pending_section, render_html, render_text
        mark = xlanb.runtime_state().log.mark()
        y = (torch.ones(3, device="xla") * 2).sum()
        print(y.item())
        report = build_report(xlanb.runtime_state().log.since(mark))
        assert "1 graph compiled" in render_text(report), render_text(report)
        assert "<details" in render_html(report)
        assert report.to_json()["version"].startswith("1.")
        assert callable(xlanb.load_ipython_extension)
        assert sys.modules["IPython"] is None
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["6.0", "ok"]
