"""The progress line shown while a long compile runs (a watcher thread; short compiles show nothing)."""

import time

from xlanb import events
from xlanb.notebook.progress import CompileProgress


class FakeDisplay:
    def __init__(self):
        self.shown = []

    def __call__(self, bundle):
        self.shown.append(bundle["text/plain"])
        return self

    def update(self, bundle, raw=True):
        self.shown.append(bundle["text/plain"])


def finished(name):
    return events.Execute(name=name, key="k", eager=False, ns=1, cached=False)


def starting(name, nodes, eager=False):
    return events.CompileStart(name=name, eager=eager, nodes=nodes)


def test_a_long_compile_shows_a_line_and_finishes_it():
    display = FakeDisplay()
    progress = CompileProgress(display, after=0.05, every=0.05)
    progress.start()
    progress.on_event(starting("step", 12))
    time.sleep(0.4)
    progress.on_event(finished("step"))
    time.sleep(0.25)
    progress.stop()
    assert display.shown[0].startswith("xlanb: compiling graph step (12 ops)...")
    assert display.shown[-1].startswith("xlanb: graph step (12 ops) compiled and launched in")


def test_short_and_eager_compiles_show_nothing():
    display = FakeDisplay()
    progress = CompileProgress(display, after=5.0)
    progress.start()
    progress.on_event(starting("quick", 1))
    progress.on_event(finished("quick"))
    progress.on_event(starting("aten.add", 1, eager=True))
    time.sleep(0.15)
    progress.stop()
    assert display.shown == []
