"""XLANB_DEBUG: what each level prints to stderr (docs/config.md)."""

import pytest
import torch

import xlanb
from xlanb._config import override


def run_twice():
    x = torch.ones(3, 3, device="xla")
    xlanb.sync()
    for n in (3, 4):
        y = (torch.ones(n, device="xla") * 2.5).exp()
        xlanb.sync()


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4, 5])
def test_each_level_adds_its_output(level, capsys):
    with override(debug=level):
        run_twice()
    err = capsys.readouterr().err
    assert ("xlanb: compile sync [" in err) == (level >= 1)
    assert ("cause: xlanb.sync" in err) == (level >= 1)
    assert ("; vs graph" in err and "recompiled at" in err) == (level >= 1)
    assert ("xlanb: execute sync [" in err) == (level >= 2)
    assert ("aten::exp.default" in err) == (level >= 3)
    assert ("stablehlo.exponential" in err) == (level >= 4)
    assert ("HloModule" in err) == (level >= 5)


def test_bad_level_is_rejected():
    with pytest.raises(ValueError, match="debug level must be 0..5"):
        with override(debug=9):
            pass
