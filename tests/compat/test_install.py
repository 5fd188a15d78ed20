"""Turning the compat layer on: install(), `python -m xlanb.compat`, refusal next to a real torch_xla."""

import sys

import pytest
import torch

import xlanb.compat
from conftest import PROGRAMS, result_of, run_python
from helpers import assert_close

NAMES = ["torch_xla", "torch_xla.core", "torch_xla.core.xla_model", "torch_xla.debug.metrics", "torch_xla.runtime",
         "torch_xla.distributed.spmd", "torch_xla.distributed.parallel_loader",
         "torch_xla.distributed.xla_multiprocessing", "torch_xla.utils.utils", "torch_xla.debug.profiler",
         "torch_xla.experimental", "torch_xla._XLAC"]


def test_install_registers_every_torch_xla_module_and_uninstall_removes_them():
    assert "torch_xla" not in sys.modules and not xlanb.compat.is_installed()
    xlanb.compat.install()
    try:
        xlanb.compat.install()                 # idempotent
        assert xlanb.compat.is_installed()
        for name in NAMES:
            assert sys.modules[name].__name__.startswith("xlanb.compat.torch_xla_tree"), name
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.spmd as xs
        assert torch_xla.core.xla_model is xm and torch_xla.distributed.spmd is xs
        assert torch_xla.runtime is sys.modules["torch_xla.runtime"]
        assert torch_xla.__version__ == "2.9.0+xlanb"
    finally:
        xlanb.compat.uninstall()
    assert not [n for n in sys.modules if n == "torch_xla" or n.startswith("torch_xla.")]
    assert not getattr(torch.compile, "_xlanb_compat_hooked", False)


def test_not_on_by_default():
    proc = run_python("-c", "import xlanb\ntry:\n    import torch_xla\nexcept ModuleNotFoundError:\n"
                            "    print('RESULT {\"missing\": true}')")
    assert result_of(proc) == {"missing": True}


def test_install_refuses_when_a_real_torch_xla_is_importable(tmp_path):
    fake = tmp_path / "torch_xla"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise SystemExit('the fake torch_xla must never be imported')\n")
    proc = run_python("-c", "import xlanb.compat\ntry:\n    xlanb.compat.install()\nexcept RuntimeError as e:\n"
                            "    import json; print('RESULT ' + json.dumps({'error': str(e)}))",
                      env_extra={"PYTHONPATH": f"{tmp_path}:{PROGRAMS.parents[2]}"})
    error = result_of(proc)["error"]
    assert error.startswith("xlanb.compat.install(): the real torch_xla is importable (")
    assert str(fake) in error and "pip uninstall torch_xla" in error


def test_python_m_xlanb_compat_runs_a_script_with_its_argv():
    proc = run_python("-m", "xlanb.compat", str(PROGRAMS / "argv.py"), "--fake_data", "7")
    r = result_of(proc)
    assert r == {"argv": [str(PROGRAMS / "argv.py"), "--fake_data", "7"], "name": "__main__", "device": "xla:0",
                 "xm": "xlanb.compat.torch_xla_tree.core.xla_model"}


def test_python_m_xlanb_compat_without_a_script_prints_usage():
    proc = run_python("-m", "xlanb.compat")
    assert proc.returncode == 2 and "usage: python -m xlanb.compat script.py [args...]" in proc.stdout
    proc = run_python("-m", "xlanb.compat", "no_such_script.py")
    assert proc.returncode == 2 and "no such script: no_such_script.py" in proc.stderr


@pytest.mark.parametrize("backend", ["openxla", "openxla_eval"])
def test_openxla_backends_are_xlanbs_once_installed(compat, backend):
    from torch._dynamo.backends.registry import lookup_backend

    import xlanb
    f = torch.compile(lambda x: (x * 2).sin(), backend=backend)
    x = torch.arange(4.0)
    out = f(x.to("xla"))
    xlanb.sync()
    assert_close(out.cpu(), (x * 2).sin())
    from xlanb import dynamo
    assert lookup_backend(backend) is dynamo.register()
