"""Live phases: a line while a graph lowers, compiles or runs for longer than a second.

Compiles and waits run on the user's thread, so a watcher thread (started per cell) looks at
that thread's stack every 0.1 s to tell the phase: lowering (`executor.lower_graph`),
compiling (`Lowered.compile`), or running on the device (blocked in a wait or a download of a
launched graph). Once a phase has lasted `after` seconds it shows one line with the phase, the
graph's name and size and the elapsed time, updates it, and finishes it with the total. The line
also carries the phase as JSON (PHASE_MIME): the JupyterLab extension draws it in the cell and
shows it in the status bar. A
compile still running after `slow` seconds (config `slow_compile`) says so, and how to interrupt
it: the pending graph stays pending and the kernel usable. Short phases show nothing.
"""

from __future__ import annotations

import contextvars
import html
import os
import sys
import threading
import time

from xlanb import events

_RUNTIME = os.path.join("xlanb", "runtime") + os.sep
_STATE = os.path.join("xlanb", "state.py")
# (file part, function) -> phase; the innermost matching frame decides
_PHASES = (((_RUNTIME, "lower_graph"), "lowering"), ((_RUNTIME, "compile"), "compiling"),
           ((_STATE, "wait"), "running"), ((_RUNTIME, "download"), "running"),
           ((_RUNTIME, "__call__"), "running"))
INTERRUPT = "Kernel > Interrupt (or the \u25a0 button) stops it; the pending graph stays pending"


def thread_phase(thread_id: int) -> str | None:
    """The phase the thread is in, read from its innermost xlanb frames (None: none of them)."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        code = frame.f_code
        for (part, function), phase in _PHASES:
            if code.co_name == function and part in code.co_filename:
                return phase
        frame = frame.f_back
    return None


class CompileProgress:
    def __init__(self, display, after: float = 1.0, every: float = 0.5, slow=None, thread_id: int | None = None):
        self.display = display          # display(bundle) -> handle with .update(bundle)
        self.after, self.every = after, every
        self.slow = slow                # seconds, or a callable giving them (the config); None: never
        self.thread_id = thread_id if thread_id is not None else threading.main_thread().ident
        self._lock = threading.Lock()
        self._current: tuple | None = None      # (monotonic start, graph name, ops) of a compile
        self._launched: tuple | None = None     # (graph name, ops) of the latest launch
        self._nodes: dict[str, int] = {}        # graph key -> ops (from Compile events)
        self._ended: tuple | None = None        # (the compile's _current, monotonic end) of the last one
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    # --- called on the user's thread -------------------------------------------------
    def on_event(self, e) -> None:
        """An event-log listener: CompileStart starts the clock, the Compile or Execute after it ends it."""
        if isinstance(e, events.CompileStart):
            if not e.eager and self._thread is not None:
                with self._lock:
                    self._current = (time.monotonic(), e.name, e.nodes)
        elif isinstance(e, (events.Compile, events.Execute)):
            if isinstance(e, events.Compile):
                self._nodes[e.key] = e.nodes
            elif not e.eager:
                self._launched = (e.name, self._nodes.get(e.key))
            if self._current is not None:
                with self._lock:       # the compile's own end: the watcher sees it up to a poll later
                    self._ended = (self._current, time.monotonic())
                    self._current = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop = threading.Event()
        ctx = contextvars.copy_context()      # the kernel's parent header: output goes to this cell
        self._thread = threading.Thread(target=ctx.run, args=(self._watch, self._stop),
                                        name="xlanb-compile-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._thread = None
        with self._lock:
            self._current = None

    def _slow(self) -> float | None:
        return self.slow() if callable(self.slow) else self.slow

    # --- the watcher thread ------------------------------------------------------------
    def _state(self, now: float, run_since: list) -> tuple | None:
        """(start, graph, ops, phase) of what the user's thread is waiting for, or None."""
        with self._lock:
            current = self._current
        phase = thread_phase(self.thread_id)
        if current is not None:
            run_since[0] = None
            return current + ("lowering" if phase == "lowering" else "compiling",)
        if phase == "running" and self._launched is not None:
            if run_since[0] is None:
                run_since[0] = (now,) + self._launched
            return run_since[0] + ("running",)
        run_since[0] = None
        return None

    def _took(self, shown: tuple, now: float) -> float:
        """How long the phase `shown` lasted: to the end the user's thread saw, for a compile."""
        with self._lock:
            ended = self._ended
        return (ended[1] if ended is not None and ended[0] == shown[:3] else now) - shown[0]

    def _watch(self, stop: threading.Event) -> None:
        handle, shown, last = None, None, 0.0
        run_since: list = [None]
        while not stop.wait(0.1):
            now = time.monotonic()
            state = self._state(now, run_since)
            if state is not None and now - state[0] >= self.after:
                if handle is None or shown[:3] != state[:3]:
                    if handle is not None:
                        handle.update(bundle(shown, self._took(shown, now), done=True), raw=True)
                    handle, shown = self.display(bundle(state, now - state[0], slow=self._slow())), state
                    last = now
                elif now - last >= self.every or state[3] != shown[3]:
                    shown = state
                    handle.update(bundle(state, now - state[0], slow=self._slow()), raw=True)
                    last = now
            elif shown is not None and (state is None or state[:3] != shown[:3]):
                handle.update(bundle(shown, self._took(shown, now), done=True), raw=True)
                handle, shown = None, None
        if shown is not None:
            handle.update(bundle(shown, self._took(shown, time.monotonic()), done=True), raw=True)


PHASE_MIME = "application/vnd.xlanb.phase+json"


def bundle(current: tuple, seconds: float, done: bool = False, slow: float | None = None) -> dict:
    """The display bundle of one phase line: text/plain, text/html, and the phase as JSON
    (PHASE_MIME, docs/report-schema.md) for the JupyterLab extension's renderer and status bar."""
    _, name, ops = current[:3]
    phase = current[3] if len(current) > 3 else "compiling"
    size = f" ({ops} ops)" if ops is not None else ""
    if done:
        verb = "ran on the device for" if phase == "running" else "compiled and launched in"
        text = f"xlanb: graph {name}{size} {verb} {seconds:.1f} s"
        return {"text/plain": text, "text/html": f"<div><b>xlanb</b> {html.escape(text[7:])}</div>",
                PHASE_MIME: phase_json(phase, name, ops, seconds, True, None, None)}
    words = {"lowering": "lowering", "compiling": "compiling", "running": "running"}[phase]
    text = f"xlanb: {words} graph {name}{size}... {seconds:.1f} s"
    note = ""
    slow = slow if phase != "running" else None
    if slow is not None and seconds >= slow:
        note = f"still {words} after {slow:g} s: {INTERRUPT}"
        text += f"; {note}"
    return {"text/plain": text,
            "text/html": f'<div class="xlanb-phase" data-phase="{phase}"><b>xlanb</b> {words} graph '
                         f'<code>{html.escape(name)}</code>{html.escape(size)} '
                         f'<progress style="vertical-align:middle;width:8em"></progress> {seconds:.1f} s'
                         + (f"<br><b>{html.escape(note)}</b>" if note else "") + "</div>",
            PHASE_MIME: phase_json(phase, name, ops, seconds, False, slow, note or None)}


def phase_json(phase: str, graph: str, ops: int | None, seconds: float, done: bool, slow_after: float | None,
               note: str | None) -> dict:
    return {"phase": phase, "graph": graph, "ops": ops, "seconds": round(seconds, 2), "done": done,
            "slow_after": slow_after, "note": note}
