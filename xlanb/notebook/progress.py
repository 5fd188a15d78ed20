"""A progress line while a long compile runs.

Compiles run on the user's thread, so a watcher thread (started per cell) shows one
line once a graph has been compiling for `after` seconds, updates it, and finishes it
with the compile time. Short compiles show nothing.
"""

from __future__ import annotations

import contextvars
import html
import threading
import time

from xlanb import events


class CompileProgress:
    def __init__(self, display, after: float = 1.0, every: float = 0.5):
        self.display = display          # display(bundle) -> handle with .update(bundle)
        self.after, self.every = after, every
        self._lock = threading.Lock()
        self._current: tuple | None = None      # (monotonic start, graph name, ops)
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    # --- called on the user's thread -------------------------------------------------
    def on_event(self, e) -> None:
        """An event-log listener: CompileStart starts the clock, the Compile or Execute after it ends it."""
        if isinstance(e, events.CompileStart):
            if not e.eager and self._thread is not None:
                with self._lock:
                    self._current = (time.monotonic(), e.name, e.nodes)
        elif isinstance(e, (events.Compile, events.Execute)) and self._current is not None:
            with self._lock:
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

    # --- the watcher thread ------------------------------------------------------------
    def _watch(self, stop: threading.Event) -> None:
        handle, shown, last = None, None, 0.0
        while not stop.wait(0.1):
            with self._lock:
                current = self._current
            now = time.monotonic()
            if current is not None and now - current[0] >= self.after:
                if handle is None or shown != current:
                    handle, shown = self.display(bundle(current, now - current[0])), current
                    last = now
                elif now - last >= self.every:
                    handle.update(bundle(current, now - current[0]), raw=True)
                    last = now
            elif shown is not None and current != shown:
                handle.update(bundle(shown, now - shown[0], done=True), raw=True)
                handle, shown = None, None
        if shown is not None:
            handle.update(bundle(shown, time.monotonic() - shown[0], done=True), raw=True)


def bundle(current: tuple, seconds: float, done: bool = False) -> dict:
    _, name, ops = current
    if done:
        text = f"xlanb: graph {name} ({ops} ops) compiled and launched in {seconds:.1f} s"
        return {"text/plain": text, "text/html": f"<div><b>xlanb</b> {html.escape(text[7:])}</div>"}
    text = f"xlanb: compiling graph {name} ({ops} ops)... {seconds:.1f} s"
    return {"text/plain": text,
            "text/html": f'<div><b>xlanb</b> compiling graph <code>{html.escape(name)}</code> ({ops} ops) '
                         f'<progress style="vertical-align:middle;width:8em"></progress> {seconds:.1f} s</div>'}
