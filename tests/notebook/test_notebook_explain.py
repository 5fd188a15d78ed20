"""In a notebook (an in-process IPython shell with `%load_ext xlanb`), recompile explanations
name cells, and the cell report style is read from the config at each cell."""

import xlanb
from xlanb._config import override

SETUP = "import torch, xlanb\nx4 = torch.ones(4, 4, device='xla')\nx5 = torch.ones(5, 5, device='xla')"
STEP = "with xlanb.compile(name='step', max_different_graphs=4):\n    y = x{n}.{op}().sum()"


def cell_files(ip) -> list[str]:
    return list(getattr(ip.compile, "_filename_map", {}))


def test_explain_recompiles_names_cells_not_their_files(ip, cell):
    cell(SETUP)
    assert cell(STEP.format(n=4, op="exp")).error is None
    second = cell(STEP.format(n=5, op="exp"))
    third = cell(STEP.format(n=5, op="sin"))
    assert second.error is None and third.error is None
    text = xlanb.debug.explain_recompiles()
    lines = text.splitlines()
    assert len(lines) == 2, text
    n2, n3 = second.result.execution_count, third.result.execution_count
    assert lines[0].startswith(f"step: recompiled at In [{n2}] line 1;")
    assert "input 0: f32[4,4] -> f32[5,5]" in lines[0]
    assert lines[1].startswith(f"step: recompiled at In [{n3}] line 1;")
    assert f"op 0: aten.exp.default -> aten.sin.default (In [{n3}] line 2)" in lines[1]
    assert ".py:" not in text
    files = cell_files(ip)
    assert files and not any(f in text for f in files)
    printed = cell("print(xlanb.debug.explain_recompiles())")         # from inside a cell, too
    assert f"In [{n3}] line 2" in printed.stdout and ".py:" not in printed.stdout


def test_unloading_the_extension_drops_its_location_namer(ip, cell):
    cell(SETUP)
    cell(STEP.format(n=4, op="exp"))
    cell(STEP.format(n=5, op="exp"))
    assert "In [" in xlanb.debug.explain_recompiles()
    ip.run_cell("%unload_ext xlanb", store_history=False)
    try:
        assert xlanb.runtime_state().location_namer is None
        assert "In [" not in xlanb.debug.explain_recompiles()
    finally:
        ip.run_cell("%load_ext xlanb", store_history=False)


def test_report_style_is_read_at_each_cell(cell):
    cell(SETUP)
    with override(report="off"):
        assert cell("y = (x4 * 2).sum()").reports == []
    with override(report="compact"):
        assert cell("y = (x4 * 3).sum()").report["cell"]["style"] == "compact"
    assert cell("y = (x4 * 4).sum()").report["cell"]["style"] == "on"
