"""The progress line shown while a long compile runs (a watcher thread; short compiles show nothing)."""

import time

from xlanb import events
from xlanb.notebook.progress import PHASE_MIME, CompileProgress


class FakeDisplay:
    def __init__(self):
        self.shown = []         # the text/plain of each display and update
        self.phases = []        # their PHASE_MIME JSON

    def __call__(self, bundle):
        self.update(bundle)
        return self

    def update(self, bundle, raw=True):
        assert set(bundle) == {"text/plain", "text/html", PHASE_MIME}
        self.shown.append(bundle["text/plain"])
        self.phases.append(bundle[PHASE_MIME])


def finished(name):
    return events.Execute(name=name, key="k", eager=False, ns=1, cached=False)


def starting(name, nodes, eager=False):
    return events.CompileStart(name=name, eager=eager, nodes=nodes)


def test_a_long_compile_shows_a_line_and_finishes_it():
    display = FakeDisplay()
    progress = CompileProgress(display, after=0.05, every=0.05)
    progress.start()
    began = time.monotonic()
    progress.on_event(starting("step", 12))
    time.sleep(0.4)
    progress.on_event(finished("step"))
    compiling = time.monotonic() - began
    time.sleep(0.25)
    progress.stop()
    assert display.shown[0].startswith("xlanb: compiling graph step (12 ops)...")
    assert display.shown[-1].startswith("xlanb: graph step (12 ops) compiled and launched in")
    first, last = display.phases[0], display.phases[-1]
    assert first == {"phase": "compiling", "graph": "step", "ops": 12, "seconds": first["seconds"], "done": False,
                     "slow_after": None, "note": None}
    assert last == {"phase": "compiling", "graph": "step", "ops": 12, "seconds": last["seconds"], "done": True,
                    "slow_after": None, "note": None}
    # however slow this machine is; the done line's time is the compile's own end (not the watcher's
    # next poll), and the phase JSON rounds seconds to 0.01
    assert 0.05 <= first["seconds"] < last["seconds"] <= compiling + 0.005
    assert [p["done"] for p in display.phases].count(True) == 1


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
    live = [p for p in display.phases if not p["done"]]
    assert all(p["slow_after"] == 0.2 and p["ops"] == 600 and p["graph"] == "big" for p in live)
    noted = [p for p in live if p["note"]]
    assert noted and all(p["seconds"] >= 0.2 for p in noted)
    assert noted[0]["note"] == slow[0].split("; ", 1)[1]                    # the text line's own words
    assert all(p["note"] is None for p in live if p["seconds"] < 0.2)
    assert display.phases[-1]["done"] and display.phases[-1]["note"] is None


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
    assert {(p["phase"], p["graph"], p["ops"], p["slow_after"], p["note"]) for p in display.phases} == {
        ("running", "step", 40, None, None)}
    assert [p["done"] for p in display.phases][-1] and not display.phases[0]["done"]


def test_the_phase_json_is_plain_data_and_the_html_escapes_names():
    """The JSON carries the graph name as given (the extension draws it with textContent)."""
    import json

    from xlanb.notebook.progress import INTERRUPT, bundle

    data = bundle((0.0, "<b>x</b>", None, "lowering"), 2.345, slow=1.0)
    assert json.loads(json.dumps(data[PHASE_MIME])) == {
        "phase": "lowering", "graph": "<b>x</b>", "ops": None, "seconds": 2.35, "done": False, "slow_after": 1.0,
        "note": f"still lowering after 1 s: {INTERRUPT}"}
    assert "&lt;b&gt;x&lt;/b&gt;" in data["text/html"] and "<b>x</b>" not in data["text/html"]
    assert bundle((0.0, "s", 3, "running"), 5.0, slow=1.0)[PHASE_MIME]["note"] is None    # only compiles are slow
