"""xlanb's configuration, the public way: read a setting, change it for the process or for a scope.

    import xlanb
    xlanb.config.debug_nans                      # the value in force now
    xlanb.config.update("debug_nans", True)      # from now on (as jax.config.update)
    with xlanb.config.override(compile_effort="fast", cache_size=512):
        ...                                      # for this block only
    xlanb.config.values()                        # every setting: a frozen Config

The settings, their XLANB_* environment variables and when each takes effect are in docs/config.md.
The notebook's `%xla_config key=value` changes the same ones. (`xlanb._config.override` and
`set_config` are the functions underneath and keep working.)
"""

from __future__ import annotations

import dataclasses

from xlanb._config import Config, config, override as _override, set_config

__all__ = ["update", "override", "values", "names", "Config"]

_FIELDS = {f.name: f for f in dataclasses.fields(Config)}


def names() -> tuple[str, ...]:
    """Every setting's name."""
    return tuple(_FIELDS)


def values() -> Config:
    """Every setting in force now, as one frozen Config."""
    return config()


def _checked(changes: dict) -> dict:
    for name, value in changes.items():
        field = _FIELDS.get(name)
        if field is None:
            raise AttributeError(f"xlanb has no setting {name!r}; its settings: {', '.join(_FIELDS)}")
        kind = type(field.default)
        ok = (type(value) is bool if kind is bool else
              isinstance(value, (int, float)) and type(value) is not bool if kind is float else
              isinstance(value, kind) and type(value) is not bool)
        if not ok:
            article = "an" if kind.__name__[0] in "aeiou" else "a"
            raise TypeError(f"xlanb setting {name!r} takes {article} {kind.__name__}, got {type(value).__name__} "
                            f"{value!r}")
    return {name: float(value) if type(_FIELDS[name].default) is float else value for name, value in changes.items()}


def update(name: str, value) -> None:
    """Changes one setting for the rest of the process (`xlanb.config.update("debug_nans", True)`)."""
    set_config(**_checked({name: value}))


def override(**changes):
    """`with xlanb.config.override(debug_nans=True): ...` changes settings for the block, and puts
    them back after it (an exception included)."""
    return _override(**_checked(changes))


def __getattr__(name: str):
    if name in _FIELDS:
        return getattr(config(), name)
    raise AttributeError(f"xlanb.config has no attribute {name!r}; its settings: {', '.join(_FIELDS)}")


def __dir__():
    return sorted(list(globals()) + list(_FIELDS))
