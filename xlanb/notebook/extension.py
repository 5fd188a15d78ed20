"""The IPython extension: magics, cell hooks, and the report after each cell that used XLA."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time

import contextlib

from xlanb import events, hooks
from xlanb._config import config
from xlanb.notebook.failure import failure_of
from xlanb.notebook.memory import memory_report
from xlanb.report import CellContext, Cells, build_report, location_text
from xlanb.report.build import relocate
from xlanb.state import release_host_memory, runtime_state

_rt = runtime_state()
RUNTIME_MAGICS = ("xla_env", "xla_reset", "xla_debug", "xla_config", "xla_compat")


@dataclasses.dataclass
class CellRun:
    """What the hooks remember about the cell that is running."""
    mark: int
    started: float
    cell_id: str | None
    pending_before: tuple
    compiled: bool = False                    # an %%xla_compile cell
    extra_frames: dict = dataclasses.field(default_factory=dict)
    scopes: contextlib.ExitStack = dataclasses.field(default_factory=contextlib.ExitStack)


class Extension:
    def __init__(self, shell):
        self.shell = shell
        self.cell: CellRun | None = None
        self.previous_eager: bool | None = None
        self.progress = None
        self._main = threading.main_thread()
        self._texts = contextlib.ExitStack()
        self.memory_baseline: dict | None = None      # {holder: bytes, "": total} after the previous report

    # --- load / unload -------------------------------------------------------------------
    def load(self) -> None:
        from IPython.display import display

        from xlanb.notebook.magics import XlaMagics
        from xlanb.notebook.progress import CompileProgress
        from xlanb.notebook.runtime_magics import RuntimeMagics

        self.shell.register_magics(XlaMagics(self.shell, self))
        self.shell.register_magics(RuntimeMagics(self.shell, self))
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)
        self.progress = CompileProgress(lambda data: display(data, raw=True, display_id=True),
                                        slow=lambda: config().slow_compile)
        hooks.subscribe(self.on_event)
        self._texts.enter_context(hooks.recording_texts())       # the report shows HLO and analyses
        self._texts.enter_context(hooks.recording_modules())     # and ops by module
        hooks.set_location_namer(self.name_location)
        self.previous_eager = hooks.is_eager_mode()
        hooks.eager_mode(True)            # notebooks start in eager mode

    def unload(self) -> None:
        for name, hook in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            if hook in self.shell.events.callbacks[name]:
                self.shell.events.unregister(name, hook)
        if self.progress is not None:
            self.progress.stop()
        hooks.unsubscribe(self.on_event)
        self._texts.close()
        hooks.set_location_namer(None)
        magics = self.shell.magics_manager.magics
        for kind, names in (("cell", ("xla_compile", "xla_compare")),
                            ("line", ("xla_mode", "xla_report", "xla_metrics")), ("line", RUNTIME_MAGICS)):
            for name in names:
                magics[kind].pop(name, None)
        if self.previous_eager is not None:
            hooks.eager_mode(self.previous_eager)
        self.cell = None

    # --- hooks ---------------------------------------------------------------------------
    def pre_run_cell(self, info) -> None:
        if getattr(info, "silent", False):
            return
        self.cell = CellRun(hooks.mark(), time.time(), getattr(info, "cell_id", None), hooks.pending_signature())
        # each op remembers its cell line: fusions, failures and recompiles name it
        self.cell.scopes.enter_context(hooks.recording_locations())
        if config().report != "off":
            self.progress.start()

    def on_event(self, e) -> None:
        if self.progress is not None:
            self.progress.on_event(e)
        cell = self.cell
        # CPU fallbacks carry no frames: record the user's line while we are on their thread
        if cell is not None and isinstance(e, events.Fallback) and threading.current_thread() is self._main:
            cell.extra_frames[e.seq] = hooks.user_frames(config().max_frames)

    def note_compiled_cell(self) -> None:
        if self.cell is not None:
            self.cell.compiled = True

    def default_graph_name(self) -> str:
        cell_id = self.cell.cell_id if self.cell is not None else None
        return f"cell_{cell_id.replace('-', '')[:8]}" if cell_id else "cell"

    def post_run_cell(self, result) -> None:
        cell, self.cell = self.cell, None
        if cell is None or getattr(result.info, "silent", False):
            return
        cell.scopes.close()
        self.progress.stop()
        try:
            self.report(cell, result)
        finally:
            if _rt.host_memory and hooks.since(cell.mark):     # it ran on the device: freed host memory goes back
                release_host_memory()

    def report(self, cell: CellRun, result) -> None:
        style = config().report
        if style == "off":
            return
        try:
            report = self.build(cell, result, style)
        except (Exception, KeyboardInterrupt) as error:      # the user's cell ran: it must not look failed
            print(f"xlanb: could not build the cell report: {type(error).__name__}: {error}".rstrip(": "),
                  file=sys.stderr)
            return
        if report is not None:
            self.show(report)

    def build(self, cell: CellRun, result, style: str):
        if _rt.faults:
            _rt.fault("report")
        eager = hooks.is_eager_mode()
        snapshot = None
        if hooks.pending_signature() != cell.pending_before:
            snapshot = hooks.snapshot_pending(self.shell.user_ns)      # an event: the report reads it
        evs = hooks.since(cell.mark)
        if not evs:
            return None
        cells = Cells(self._cell_files(), result.execution_count)
        error = getattr(result, "error_in_exec", None)
        failure = None
        if error is not None and snapshot is not None:      # the partial graph of a failed cell
            failure = failure_of(error, cells, relocate(snapshot.ir, cells))
        mode = "compiled" if cell.compiled else ("eager" if eager else "lazy")
        ctx = CellContext(
            execution_count=result.execution_count, cell_id=cell.cell_id, mode=mode, style=style, cells=cells,
            started=cell.started, finished=time.time(), extra_frames=cell.extra_frames, state=hooks.status())
        report = build_report(evs, ctx, failure=failure)
        if report.empty:
            return None
        memory, self.memory_baseline = memory_report(self.shell.user_ns, _rt.jax_device(),
                                                     previous=self.memory_baseline, graphs=report.graphs,
                                                     share=config().memory_warning)
        return dataclasses.replace(report, memory=memory)

    def _cell_files(self) -> dict:
        """IPython's map of each cell's made-up filename to its execution count."""
        return dict(getattr(self.shell.compile, "_filename_map", {}))

    def name_location(self, location: str) -> str:
        """`"1234.py:2"` -> `"In [6] line 2"` when that file is a cell (for explain_recompiles)."""
        return location_text(location, Cells(self._cell_files(), current=0))

    def show(self, report) -> None:
        from IPython.display import display

        from xlanb.notebook.widget import report_bundle
        data, metadata = report_bundle(report, widget=_has_anywidget())
        display(data, metadata=metadata, raw=True)


def _has_anywidget() -> bool:
    try:
        import anywidget  # noqa: F401
    except ImportError:
        return False
    return True
