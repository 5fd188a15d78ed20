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


def test_a_slow_compile_says_so_and_how_to_interrupt():
    display = FakeDisplay()
    progress = CompileProgress(display, after=0.05, every=0.05, slow=lambda: 0.2)
    progress.start()
    progress.on_event(starting("big", 600))
    time.sleep(0.5)
    progress.on_event(finished("big"))
    time.sleep(0.2)
    progress.stop()
    slow = [s for s in display.shown if "still compiling after 0.2 s" in s]
    assert slow and "Kernel > Interrupt" in slow[0] and "the pending graph stays pending" in slow[0]
    assert not any("still" in s for s in display.shown if s.startswith("xlanb: compiling graph big (600 ops)... 0.1"))


def test_phases_are_read_from_the_user_threads_stack(monkeypatch):
    """Called from inside lowering and inside XLA's compile, the user's thread is seen in that phase."""
    import threading

    import torch

    import xlanb
    from xlanb.notebook.progress import thread_phase
    from xlanb.runtime import executor, stages

    seen = {}
    real_build, real_init = executor.build_function, stages.Compiled.__init__

    def build(graph):
        seen["lowering"] = thread_phase(threading.get_ident())
        return real_build(graph)

    def init(self, *args):
        seen["compiling"] = thread_phase(threading.get_ident())
        real_init(self, *args)
    monkeypatch.setattr(executor, "build_function", build)
    monkeypatch.setattr(stages.Compiled, "__init__", init)
    xlanb.runtime_state().cache.clear()
    with xlanb.compile(name="phased"):
        y = torch.ones(3, device="xla") * 7.25
    assert y.cpu().tolist() == [7.25] * 3
    assert seen == {"lowering": "lowering", "compiling": "compiling"}
    assert thread_phase(threading.get_ident()) is None


def test_a_long_run_on_the_device_shows_the_running_phase(monkeypatch):
    from xlanb.notebook import progress as progress_mod

    display = FakeDisplay()
    progress = CompileProgress(display, after=0.05, every=0.05)
    phase = ["running"]                                          # the user's thread waits on the device
    monkeypatch.setattr(progress_mod, "thread_phase", lambda ident: phase[0])
    progress.start()
    progress.on_event(events.Compile(name="step", key="k", eager=False, nodes=40, inputs=(), outputs=(),
                                     scalars=0, lower_ns=1, compile_ns=1, persistent_hit=False, cause=""))
    progress.on_event(finished("step"))
    time.sleep(0.4)
    phase[0] = None
    time.sleep(0.3)
    progress.stop()
    assert display.shown[0].startswith("xlanb: running graph step (40 ops)...")
    assert display.shown[-1].startswith("xlanb: graph step (40 ops) ran on the device for")
