"""The bench scripts that reach into xlanb's internals still find what they time. bench/ runs only in
`make bench`: a function written inline in capture/scopes.py broke module_scopes.py's job, and only a
bench run showed it."""

import importlib
import os
import sys

import torch

import xlanb

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")


def bench_module(name: str):
    """bench/<name>.py, imported with bench/ on the path for its own imports (common, models, figures),
    which are taken off sys.modules again: tests have modules of those names."""
    before = set(sys.modules)
    sys.path.insert(0, BENCH)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(BENCH)
        for added in set(sys.modules) - before:
            if getattr(sys.modules[added], "__file__", "") and sys.modules[added].__file__.startswith(BENCH):
                del sys.modules[added]


def test_make_bench_imports_every_job():
    run = bench_module("run")
    assert {system for system, _, _ in run.JOBS} >= {"xlanb", "jax", "torch", "torch_xla"}


def test_replay_phases_find_the_functions_they_time():
    phases = bench_module("replay_phases")
    assert all(callable(getattr(module, attr)) for module, attr in phases.PHASES.values())


def test_module_scopes_times_the_scope_wrapper():
    scopes = bench_module("module_scopes")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).to("xla")
    x = torch.randn(3, 4).to("xla")

    def step():
        model(x).sum().backward()
    own_call = torch.nn.Module.__call__
    spent = scopes._in_scope_code(step, 3)
    assert 0 < spent < 0.01                       # seconds a step in the wrapper and the backward lookup
    assert torch.nn.Module.__call__ is own_call   # torch's own again once the scope closed
    xlanb.sync()
