"""The notebook side of xlanb: `%load_ext xlanb` (magics, cell hooks, the cell report).

Only this package imports IPython, ipywidgets and anywidget, and only when the
extension loads, so `import xlanb` works without them.
"""

from __future__ import annotations

_loaded: dict[int, object] = {}        # id(shell) -> Extension


def load_ipython_extension(ip) -> None:
    """Registers %%xla_compile, %%xla_compare, %xla_mode, %xla_report, %xla_metrics, %xla_env, %xla_reset,
    %xla_debug, %xla_config and the cell hooks;
    cells then run in eager mode. Loading twice does nothing."""
    if id(ip) in _loaded:
        return
    from xlanb.notebook.extension import Extension
    ext = Extension(ip)
    ext.load()
    _loaded[id(ip)] = ext


def unload_ipython_extension(ip) -> None:
    """Removes what loading added and restores the mode from before `%load_ext`."""
    ext = _loaded.pop(id(ip), None)
    if ext is not None:
        ext.unload()
