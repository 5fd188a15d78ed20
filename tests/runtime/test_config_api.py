"""xlanb.config, the public configuration API: a setting read by name, update for the process,
override for a block (restored after an exception too), clear errors for unknown names, wrong
types and values out of range, and the same settings as xlanb._config's functions."""

import pytest

import xlanb
from xlanb import _config


@pytest.fixture(autouse=True)
def restore():
    before = _config.config()
    yield
    _config.set_config(**{n: getattr(before, n) for n in xlanb.config.names() if n != "device_name"})


def test_a_setting_reads_as_an_attribute_and_values_is_the_config_in_force():
    assert xlanb.config.cache_size == _config.config().cache_size
    assert xlanb.config.values() is _config.config()
    assert "debug_nans" in dir(xlanb.config) and "compile_effort" in xlanb.config.names()


def test_update_changes_it_for_the_process():
    xlanb.config.update("report", "compact")
    assert xlanb.config.report == "compact" and _config.config().report == "compact"
    xlanb.config.update("memory_warning", 1)            # an int where a float is taken
    assert xlanb.config.memory_warning == 1.0 and type(xlanb.config.memory_warning) is float


def test_override_restores_after_the_block_and_after_an_exception():
    before = xlanb.config.values()
    with xlanb.config.override(cache_size=7, debug_nans=True) as inside:
        assert inside.cache_size == 7 and xlanb.config.debug_nans is True
    assert xlanb.config.values() == before
    with pytest.raises(KeyError):
        with xlanb.config.override(compile_effort="fast"):
            assert xlanb.config.compile_effort == "fast"
            raise KeyError("in the block")
    assert xlanb.config.values() == before


def test_debug_nans_through_the_public_api_takes_effect():
    with xlanb.config.override(debug_nans=True):
        import torch
        x = torch.tensor([-1.0], device="xla")
        y = x.sqrt()
        with pytest.raises(FloatingPointError, match="aten.sqrt"):
            xlanb.sync(wait=True)     # a sync reads the flags of the graphs done by then: on a TPU, not this one
    assert y.isnan().item()


@pytest.mark.parametrize("name, value, error, words", [
    ("cache_sise", 8, AttributeError, "xlanb has no setting 'cache_sise'; its settings: cache_size"),
    ("cache_size", "8", TypeError, "xlanb setting 'cache_size' takes an int, got str '8'"),
    ("debug_nans", 1, TypeError, "takes a bool, got int 1"),
    ("cache_size", True, TypeError, "takes an int, got bool True"),
    ("cache_size", 0, ValueError, "cache_size must be >= 1, got 0"),
    ("report", "loud", ValueError, "report must be on, off, compact or full"),
])
def test_bad_input_is_refused_and_changes_nothing(name, value, error, words):
    before = xlanb.config.values()
    with pytest.raises(error) as raised:
        xlanb.config.update(name, value)
    assert words in str(raised.value)
    with pytest.raises(error):
        with xlanb.config.override(**{name: value}):
            pass
    assert xlanb.config.values() == before


def test_an_unknown_attribute_names_the_settings():
    with pytest.raises(AttributeError, match="xlanb.config has no attribute 'nope'; its settings: cache_size"):
        xlanb.config.nope
