"""The set-up installs the extension where JupyterLab finds it, and a wheel carries it prebuilt."""

import json
import pathlib
import subprocess
import sys
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
NAME = json.loads((REPO / "labextension" / "package.json").read_text())["name"]


def test_jupyter_labextension_list_shows_it_enabled_and_ok():
    result = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                            text=True, timeout=120)
    lines = [ln for ln in (result.stdout + result.stderr).splitlines() if NAME in ln]
    if not lines and not (REPO / "xlanb" / "labextension" / "package.json").exists():
        pytest.skip("the extension is not built yet: `make setup` builds and installs it")
    assert lines, result.stdout + result.stderr
    assert "enabled" in lines[0] and "OK" in lines[0], lines[0]


def test_pip_wheel_contains_the_prebuilt_extension(tmp_path):
    if not (REPO / "xlanb" / "labextension" / "package.json").exists():
        pytest.skip("the extension is not built yet: `make setup` builds it")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    wheel = next(tmp_path.glob("xlanb-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    prefix = f"share/jupyter/labextensions/{NAME}/"
    assert any(n.endswith(prefix + "package.json") for n in names)
    assert any(prefix + "static/" in n for n in names)
    assert any(n.endswith(prefix + "install.json") for n in names)
    assert "xlanb/__init__.py" in names
    assert {"xlanb/notebook/static/widget.js", "xlanb/notebook/static/widget.css"} <= set(names)   # the widget's
    assert not any(n.startswith("xlanb/labextension/") for n in names)


def install_cell() -> str:
    """The install cell every notebook starts with (the same text in each, checked here)."""
    cells = set()
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        found = [s for s in sources if "import xlanb" in s and "%pip install" in s]
        assert found, f"{path.name} has no install cell"
        start, pip = found[0].index("# In Colab"), found[0].index("%pip")
        end = found[0].index("    import xlanb", pip) + len("    import xlanb")
        cells.add(found[0][start:end])
    assert len(cells) == 1, cells
    return cells.pop()


def test_every_notebook_installs_from_the_wheel_not_from_pypi():
    """xlanb is not on PyPI: an install cell that says `%pip install xlanb` fails in a fresh Colab."""
    cell = install_cell()
    assert "%pip install --quiet {wheels[-1]}" in cell and "make wheel" in cell
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        assert "pip install --quiet xlanb\\n" not in path.read_text(), path.name


def test_the_wheel_installs_into_an_empty_venv_and_lists_its_extension(tmp_path):
    """`make wheel`'s command, then a fresh venv where the notebooks' install cell installs it: xlanb imports
    from the wheel's copy, JupyterLab lists
    the wheel's extension enabled, and %xla_env's check finds it. The venv gets torch, jax and jupyterlab
    from this interpreter through a .pth after its own site-packages (installing them would download
    gigabytes); xlanb itself and the extension come only from the wheel."""
    import os
    import sysconfig
    import venv

    if not (REPO / "xlanb" / "labextension" / "package.json").exists():
        pytest.skip("the extension is not built yet: `make setup` builds it")
    dist = tmp_path / "dist"
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(dist)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list(dist.glob("xlanb-*.whl"))) == 1          # what the install cell finds and installs
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUPYTER", "VIRTUAL_ENV"))}
    for k in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        env[k] = str(tmp_path / k.lower())
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, env=env).stdout.strip()
    (pathlib.Path(site) / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # the notebooks' own install cell, run by IPython next to the wheel (as in a Colab with it uploaded)
    cell = tmp_path / "install_cell.ipy"
    cell.write_text(install_cell() + "\nprint('installed', xlanb.__file__)\n")
    install = subprocess.run([str(py), "-m", "IPython", "--no-banner", "--quick", str(cell)], capture_output=True,
                             text=True, timeout=600, env=env, cwd=dist)
    assert install.returncode == 0 and "installed " + site in install.stdout, install.stdout[-3000:] + install.stderr[-3000:]
    probe = ("import xlanb, json; from xlanb.notebook.environment import environment; e = environment(); "
             "print(json.dumps([xlanb.__file__, e.extension_installed, e.extension_enabled, e.extension_path]))")
    out = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    module, installed, enabled, where = json.loads(out.stdout.strip().splitlines()[-1])
    assert module.startswith(site) and installed and enabled and where.startswith(str(env_dir))
    listing = subprocess.run([str(py), "-m", "jupyterlab.labextensions", "list"], capture_output=True, text=True,
                             timeout=300, env=env, cwd=tmp_path)
    lines = [ln for ln in (listing.stdout + listing.stderr).splitlines() if NAME in ln]
    assert lines and "enabled" in lines[0] and "OK" in lines[0], listing.stdout + listing.stderr
    assert str(env_dir) in listing.stdout + listing.stderr
