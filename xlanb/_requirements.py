"""The torch, jax and Python releases xlanb serves, checked first at import: an older one stops
`import xlanb` with one sentence naming what works and the `pip install` line (pyproject.toml
declares the same ranges). Each layer's version-specific code lives in its own small module
(capture/torch_versions.py, dynamo/_torch_hooks.py, lower/jax_versions.py)."""

from __future__ import annotations

import re
import sys

TORCH_MIN = (2, 9)
JAX_MIN = (0, 10)
PYTHON_MIN = (3, 11)
TESTED = "torch 2.9 to 2.15, jax 0.10.2 to 0.12, Python 3.11 to 3.13"


def release(version: str) -> tuple[int, ...]:
    """'2.9.0+cu128' -> (2, 9, 0); '0.13.0rc1' -> (0, 13, 0): the leading numbers of the release."""
    parts = []
    for p in version.split("+")[0].split("."):
        digits = re.match(r"\d*", p).group()
        if not digits:
            break
        parts.append(int(digits))
        if digits != p:
            break
    return tuple(parts)


def installed(dist: str) -> str | None:
    """The installed version of a distribution, or None."""
    import importlib.metadata
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check(torch_version: str, jax_version: str, python=sys.version_info) -> None:
    """Raises ImportError naming the supported releases when one of these is older."""
    old = []
    if tuple(python[:2]) < PYTHON_MIN:
        old.append(f"Python {python[0]}.{python[1]}")
    if release(torch_version)[:2] < TORCH_MIN:
        old.append(f"torch {torch_version}")
    if release(jax_version)[:2] < JAX_MIN:
        old.append(f"jax {jax_version}")
    if old:
        raise ImportError(f"xlanb needs torch >= 2.9, jax >= 0.10 and Python >= 3.11 (tested: {TESTED}); this "
                          f"environment has {' and '.join(old)}: pip install -U 'torch>=2.9' 'jax>=0.10' 'jaxlib>=0.10'")
