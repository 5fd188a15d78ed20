"""Fixtures of the runtime's tests."""

import jax
import pytest


@pytest.fixture
def spy(monkeypatch):
    """The compiler options each XLA compile was given."""
    seen = []
    real = jax.stages.Lowered.compile

    def compile(self, compiler_options=None, **kwargs):
        seen.append(compiler_options)
        return real(self, compiler_options=compiler_options, **kwargs)
    monkeypatch.setattr(jax.stages.Lowered, "compile", compile)
    return seen
