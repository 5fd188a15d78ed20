"""%xla_env, %xla_reset, %xla_debug and %xla_config: their output, help and UsageErrors."""

import jax
import pytest
import torch
from IPython.core.error import UsageError

import xlanb
from xlanb._config import config, set_config
from xlanb.notebook.environment import environment


@pytest.fixture
def restore_config():
    previous = config()
    yield
    set_config(debug=previous.debug, cache_size=previous.cache_size, memory_warning=previous.memory_warning,
               special_scalars=previous.special_scalars)


def test_env_reports_platform_versions_cache_extension_and_colab(cell):
    c = cell("%xla_env")
    assert c.error is None
    (out,) = [o.data for o in c.outputs if "xlanb-env" in o.data.get("text/html", "")]
    text = out["text/plain"]
    device = jax.devices()[0]
    assert f"platform: {device.platform}, {len(jax.devices())} device" in text
    assert f"torch {torch.__version__}" in text and f"jax {jax.__version__}" in text and "jaxlib " in text
    assert "(no libtpu)" in text and "compatible: yes" in text
    assert "float32 matmul precision: highest (XLA HIGHEST; torch.set_float32_matmul_precision changes it)" in text
    assert f"compilation cache: {config().cache_dir}" in text
    assert ("host memory: XLA's temporaries kept between executions" if xlanb.runtime_state().host_memory
            else "host memory: the C library's defaults") in text
    assert "JupyterLab extension: enabled" in text and "Colab: no" in text
    assert "config: cache_size=" in text and "memory_warning=" in text
    env = environment()
    assert env.extension_installed and env.extension_enabled and not env.colab
    assert (text.endswith("everything looks right")) == env.ok


def test_env_says_what_to_do_when_the_extension_is_missing(monkeypatch):
    from xlanb.notebook import environment as envmod
    monkeypatch.setattr(envmod, "extension_state", lambda: (False, False, ""))
    env = envmod.environment()
    assert not env.ok
    assert any(p.startswith("the JupyterLab extension is not installed: install xlanb from its wheel")
               for p in env.problems)
    assert "problems:\n  - the JupyterLab extension is not installed" in envmod.environment_text(env)


def test_env_shows_the_matmul_precision_in_force_in_jax_words_too():
    from xlanb.notebook import environment as envmod
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        env = envmod.environment()
    finally:
        torch.set_float32_matmul_precision(before)
    assert env.matmul_precision == "medium"
    assert "float32 matmul precision: medium (XLA DEFAULT;" in envmod.environment_text(env)


def test_env_flags_an_old_jaxlib(monkeypatch):
    from xlanb.notebook import environment as envmod
    real = envmod._version
    monkeypatch.setattr(envmod, "_version", lambda d: "0.9.0" if d == "jaxlib" else real(d))
    env = envmod.environment()
    assert any(p.startswith("jaxlib 0.9.0 is older than jax") for p in env.problems)
    assert "compatible: no" in envmod.environment_text(env)


@pytest.mark.parametrize("line, words", [
    ("%xla_env now", "%xla_env takes no arguments"),
    ("%xla_reset all", "%xla_reset takes no arguments"),
    ("%xla_debug loud", "%xla_debug takes a level 0..5, got 'loud'"),
    ("%xla_debug 6", "%xla_debug takes a level 0..5, got 6"),
    ("%xla_config cache_size", "%xla_config takes key=value pairs, got 'cache_size'"),
    ("%xla_config cache_sise=3", "%xla_config: unknown key 'cache_sise'; keys: cache_size, cache_dir"),
    ("%xla_config cache_size=many", "%xla_config cache_size: invalid literal for int()"),
    ("%xla_config cache_size=0", "%xla_config: cache_size must be >= 1, got 0"),
    ("%xla_config special_scalars=maybe", "%xla_config special_scalars: special_scalars takes true or false"),
    ("%xla_config device_name=tpu", "%xla_config: device_name cannot change after xlanb is imported"),
])
def test_bad_arguments_raise_usage_errors(cell, line, words, restore_config):
    before = config()
    c = cell(line)
    assert isinstance(c.error, UsageError) and str(c.error).startswith(words), c.error
    assert config() == before                           # nothing changed


@pytest.mark.parametrize("magic, words", [
    ("xla_env", "Platform, device kind and count"), ("xla_reset", "a fresh runtime without restarting"),
    ("xla_debug", "xlanb's debug printing (0 off .. 5)"), ("xla_config", "key=value [key=value ...]")])
def test_each_magic_has_help(cell, magic, words):
    c = cell(f"%{magic}?")
    assert words in c.stdout


def test_debug_sets_the_level_at_run_time(cell, restore_config):
    assert cell("%xla_debug 1").error is None and config().debug == 1
    assert cell("%xla_debug").stdout.strip() == "1"
    cell("import torch, xlanb\nq = torch.ones(3, device='xla')")
    c = cell("%%xla_compile --name dbg\nr = q * 7.5")
    assert "dbg" in c.stderr                               # level 1 prints each compile to stderr
    assert cell("%xla_debug 0").error is None and config().debug == 0


def test_config_changes_settings_at_run_time_and_prints_them(cell, restore_config):
    c = cell("%xla_config cache_size=3 memory_warning=0.25 special_scalars=false")
    assert c.error is None and c.stdout.strip() == "cache_size = 3, memory_warning = 0.25, special_scalars = False"
    assert (config().cache_size, config().memory_warning, config().special_scalars) == (3, 0.25, False)
    listing = cell("%xla_config").stdout
    assert "cache_size = 3\n" in listing and "report = 'on'\n" in listing


def test_reset_leaves_a_usable_runtime(cell):
    cell("import torch, xlanb\nkept = torch.arange(6.0, device='xla') * 2.5")
    cell("%xla_mode lazy")
    cell("pend = kept + 1")
    rt = xlanb.runtime_state()
    assert len(rt.cache) > 0 and xlanb.metrics.counter_names()
    c = cell("%xla_reset")
    assert c.error is None
    assert c.stdout.startswith("xlanb: runtime reset: ") and "compiled graphs dropped" in c.stdout
    assert len(rt.cache) == 0 and rt.pending == []
    assert xlanb.is_eager_mode()                           # cells run eagerly again, as after %load_ext
    c = cell("out = (kept * 2).sum().item()\nback = pend.cpu()")
    assert c.error is None
    ns = c.result.info.raw_cell and __import__("IPython").get_ipython().user_ns
    assert ns["out"] == pytest.approx(75.0)                # computed tensors keep their values
    assert ns["back"].tolist() == [1.0, 3.5, 6.0, 8.5, 11.0, 13.5]     # a pending one still computes
    assert xlanb.metrics.counter_value("UncachedCompile") >= 1          # counters started again
    report = c.report
    assert report["summary"]["eager_ops_executed"] >= 1


def test_config_debug_nans_names_the_op_at_its_cell_line(cell):
    try:
        assert cell("%xla_config debug_nans=1").stdout.strip() == "debug_nans = True"
        cell("import torch, xlanb")
        c = cell("x = torch.tensor([4.0, -1.0], device='xla')\ny = x.sqrt()\nxlanb.sync()")
        assert isinstance(c.error, FloatingPointError), c.error
        assert str(c.error).startswith("NaN produced by aten.sqrt.default at In ["), c.error
        assert " line 2 in graph " in str(c.error)
    finally:
        set_config(debug_nans=False)


@pytest.mark.parametrize("reused", [True, False, None])
def test_env_says_whether_host_memory_is_kept_for_xla(reused):
    import dataclasses
    from xlanb.notebook import environment as envmod
    text = envmod.environment_text(dataclasses.replace(envmod.environment(), host_memory=reused))
    expected = ("host memory: XLA's temporaries kept between executions (glibc's malloc set; "
                "XLANB_HOST_MEMORY_REUSE=0 leaves it)" if reused else "host memory: the C library's defaults")
    assert expected in text
