"""The runtime magics: %xla_env, %xla_reset, %xla_debug LEVEL, %xla_config key=value, %xla_compat [on|off],
%xla_selfcheck [--quick|--full]."""

from __future__ import annotations

import dataclasses
import html
import time

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from xlanb import hooks
from xlanb._config import Config, config, set_config
from xlanb.state import runtime_state


def _parse(field: dataclasses.Field, raw: str):
    kind = field.type if isinstance(field.type, str) else field.type.__name__
    if kind == "bool":
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{field.name} takes true or false, got {raw!r}")
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    return raw


@magics_class
class RuntimeMagics(Magics):
    def __init__(self, shell, extension):
        super().__init__(shell)
        self.extension = extension

    @line_magic
    def xla_env(self, line):
        """%xla_env: is the environment right? Platform, device kind and count, torch / jax /
        jaxlib / libtpu versions and whether they fit, xlanb's config, the compilation cache
        directory and its size, whether the JupyterLab extension is installed and enabled,
        whether this is Colab, and what to do about anything wrong."""
        if line.strip():
            raise UsageError(f"%xla_env takes no arguments, got {line.strip()!r}")
        from IPython.display import display

        from xlanb.notebook.environment import environment, environment_text
        text = environment_text(environment())
        display({"text/plain": text,
                 "text/html": f"<pre class='xlanb-env'><b>xlanb environment</b>\n{html.escape(text)}</pre>"},
                raw=True)

    @line_magic
    def xla_reset(self, line):
        """%xla_reset: a fresh runtime without restarting the kernel. Compiled graphs, counters,
        pending graphs, graph limits and the event log are dropped; cells run in eager mode again.
        Tensors already computed keep their device buffers and stay usable; a tensor still
        pending is no longer synced by xlanb.sync(), but reading its value computes it."""
        if line.strip():
            raise UsageError(f"%xla_reset takes no arguments, got {line.strip()!r}")
        rt = runtime_state()
        cached, pending = len(rt.cache), hooks.status()["pending_nodes"]
        rt.reset()
        hooks.eager_mode(True)                 # as after %load_ext
        self.extension.memory_baseline = None
        if self.extension.cell is not None:      # this cell's report starts after the reset
            self.extension.cell.mark = hooks.mark()
            self.extension.cell.pending_before = hooks.pending_signature()
        print(f"xlanb: runtime reset: {cached} compiled graphs dropped, {pending} pending ops no longer synced "
              "(reading a pending tensor still computes it); counters at zero; eager mode")

    @line_magic
    def xla_debug(self, line):
        """%xla_debug LEVEL: xlanb's debug printing (0 off .. 5), at run time; no argument prints it.

        1 each compile and why it recompiled, 2 + each execution, 3 + the IR, 4 + StableHLO,
        5 + the optimized HLO (docs/config.md)."""
        arg = line.strip()
        if not arg:
            print(config().debug)
            return
        try:
            level = int(arg)
        except ValueError:
            raise UsageError(f"%xla_debug takes a level 0..5, got {arg!r}") from None
        if not 0 <= level <= 5:
            raise UsageError(f"%xla_debug takes a level 0..5, got {level}")
        set_config(debug=level)

    @line_magic
    def xla_config(self, line):
        """%xla_config key=value [key=value ...]: change xlanb's configuration at run time
        (docs/config.md lists the keys); no argument prints the configuration in force.

        Example: %xla_config cache_size=512 memory_warning=0.25"""
        args = line.split()
        fields = {f.name: f for f in dataclasses.fields(Config)}
        if not args:
            for name in fields:
                print(f"{name} = {getattr(config(), name)!r}")
            return
        changes = {}
        for arg in args:
            key, sep, raw = arg.partition("=")
            if not sep or not key:
                raise UsageError(f"%xla_config takes key=value pairs, got {arg!r}")
            if key not in fields:
                raise UsageError(f"%xla_config: unknown key {key!r}; keys: {', '.join(fields)}")
            try:
                changes[key] = _parse(fields[key], raw)
            except ValueError as error:
                raise UsageError(f"%xla_config {key}: {error}") from None
        try:
            set_config(**changes)
        except ValueError as error:
            raise UsageError(f"%xla_config: {error}") from None
        print(", ".join(f"{k} = {v!r}" for k, v in changes.items()))

    @line_magic
    def xla_compat(self, line):
        """%xla_compat [on|off]: `import torch_xla...` resolves to xlanb in this kernel
        (xlanb.compat.install()), so torch_xla's notebooks run unchanged; `off` takes torch_xla's
        names out again. docs/torch_xla.md lists what is covered."""
        from xlanb import compat
        arg = line.strip() or "on"
        if arg == "on":
            try:
                compat.install()
            except RuntimeError as error:
                raise UsageError(str(error)) from None
            print("xlanb.compat: torch_xla's modules now resolve to xlanb (docs/torch_xla.md lists what is covered)")
        elif arg == "off":
            compat.uninstall()
            print("xlanb.compat: torch_xla's names removed (modules that imported them keep what they hold)")
        else:
            raise UsageError(f"%xla_compat takes on or off, got {arg!r}")

    @line_magic
    def xla_selfcheck(self, line):
        """%xla_selfcheck [--quick|--full]: does xlanb work on this machine, and how fast? The table of
        `python -m xlanb.selfcheck`: versions and devices, a training step, an eager op, a replayed step and
        a tiny HF model's tokens against the CPU, W3 and W4 steps against pure JAX, device memory, and
        what to do about anything wrong. --quick (the default on a CPU) runs a smaller W4."""
        arg = line.strip()
        if arg not in ("", "--quick", "--full"):
            raise UsageError(f"%xla_selfcheck takes --quick or --full, got {arg!r}")
        from xlanb import selfcheck
        t0 = time.perf_counter()
        rows = selfcheck.run(None if not arg else arg == "--quick")
        print(selfcheck.render_text(rows, time.perf_counter() - t0))
