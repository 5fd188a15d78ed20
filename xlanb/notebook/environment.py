"""What `%xla_env` reports: platform, devices, versions and whether they fit, the float32 matmul
precision in force, the config, the compilation cache, the JupyterLab extension, Colab, and what to do
about anything wrong."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import sys

from xlanb._config import config
from xlanb._requirements import JAX_MIN, TORCH_MIN, release
from xlanb._requirements import installed as _version
from xlanb.ir.precision import matmul_precision, xla_precision

MIN_TORCH, MIN_JAX = TORCH_MIN, JAX_MIN
EXTENSION = "xlanb-lab"


def _tuple(version: str | None) -> tuple:
    return release(version or "")[:3]


def _dir_size(path: str) -> tuple[int, int]:
    files = size = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                size += os.path.getsize(os.path.join(root, n))
                files += 1
            except OSError:
                pass
    return files, size


def extension_state() -> tuple[bool, bool, str]:
    """(installed, enabled, where) of the JupyterLab extension, from Jupyter's data and config paths."""
    from jupyter_core.paths import jupyter_config_path, jupyter_path
    where = ""
    for base in jupyter_path("labextensions"):
        if (pathlib.Path(base) / EXTENSION / "package.json").is_file():
            where = str(pathlib.Path(base) / EXTENSION)
            break
    enabled = bool(where)
    for base in jupyter_config_path():
        page = pathlib.Path(base) / "labconfig" / "page_config.json"
        try:
            disabled = json.loads(page.read_text()).get("disabled_labextensions", {})
        except (OSError, ValueError):
            continue
        if disabled.get(EXTENSION):
            enabled = False
    return bool(where), enabled, where


@dataclasses.dataclass(frozen=True)
class Environment:
    platform: str
    device_kind: str
    device_count: int
    versions: dict
    config: dict
    cache_dir: str
    cache_files: int
    cache_bytes: int
    extension_installed: bool
    extension_enabled: bool
    extension_path: str
    colab: bool
    problems: tuple[str, ...]          # what is wrong, each with what to do
    matmul_precision: str = "highest"  # torch.get_float32_matmul_precision(): float32 dots and convolutions
    host_memory: bool | None = None    # Runtime.host_memory: glibc's malloc set for XLA's CPU temporaries

    @property
    def ok(self) -> bool:
        return not self.problems


def environment() -> Environment:
    import jax
    import torch

    from xlanb.state import runtime_state

    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "jax": _version("jax"),
                "jaxlib": _version("jaxlib"), "libtpu": _version("libtpu") or _version("libtpu-nightly"),
                "xlanb": _version("xlanb")}
    problems = []
    if _tuple(versions["torch"]) < MIN_TORCH:
        problems.append(f"torch {versions['torch']} is older than {'.'.join(map(str, MIN_TORCH))}: "
                        "pip install -U 'torch>=2.9'")
    if _tuple(versions["jax"]) < MIN_JAX:
        problems.append(f"jax {versions['jax']} is older than 0.10: pip install -U 'jax>=0.10'")
    if versions["jax"] and versions["jaxlib"] and _tuple(versions["jaxlib"]) < _tuple(versions["jax"]):
        problems.append(f"jaxlib {versions['jaxlib']} is older than jax {versions['jax']}: "
                        f"pip install -U 'jaxlib=={versions['jax']}'")
    if versions["libtpu"] is None and config().platform == "tpu":
        problems.append("XLANB_PLATFORM=tpu but libtpu is not installed: pip install 'xlanb[tpu]'")
    try:
        device = runtime_state().jax_device()
        platform, kind = device.platform, getattr(device, "device_kind", "")
        count = len(jax.devices(device.platform))
    except RuntimeError as error:
        platform, kind, count = config().platform or "?", "", 0
        problems.append(f"no {config().platform or 'default'} JAX device: {error}. Set XLANB_PLATFORM "
                        "(cpu, gpu, tpu) before importing xlanb, or install the plugin (xlanb[cuda], xlanb[tpu])")
    colab = "google.colab" in sys.modules
    if colab and platform == "cpu":
        problems.append("Colab runtime on the CPU: Runtime > Change runtime type picks a GPU or TPU "
                        "(then pip install 'xlanb[cuda]' or 'xlanb[tpu]' and restart)")
    installed, enabled, where = extension_state()
    if not colab and not installed:
        problems.append("the JupyterLab extension is not installed: install xlanb from its wheel "
                        "(make wheel; pip install dist/xlanb-*.whl) and reload the page; the report still "
                        "shows as a widget or HTML")
    elif installed and not enabled:
        problems.append(f"the JupyterLab extension is disabled: jupyter labextension enable {EXTENSION}")
    cfg = config()
    cache_dir = cfg.cache_dir
    files, size = _dir_size(cache_dir) if cfg.persistent_cache and os.path.isdir(cache_dir) else (0, 0)
    return Environment(platform, kind, count, versions, dataclasses.asdict(cfg), cache_dir, files, size,
                       installed, enabled, where, colab, tuple(problems), matmul_precision(),
                       runtime_state().host_memory)


def environment_text(env: Environment) -> str:
    from xlanb.report.format import format_bytes

    v = env.versions
    lines = [
        f"platform: {env.platform}, {env.device_count} device{'s' if env.device_count != 1 else ''}"
        + (f" ({env.device_kind})" if env.device_kind else ""),
        "versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) +
        ("" if v.get("libtpu") else " (no libtpu)"),
        "compatible: " + ("yes" if not any("older" in p for p in env.problems) else "no"),
        f"float32 matmul precision: {env.matmul_precision} (XLA {xla_precision(env.matmul_precision)}; "
        "torch.set_float32_matmul_precision changes it)",
        f"compilation cache: {env.cache_dir} ({env.cache_files} files, {format_bytes(env.cache_bytes)})"
        + ("" if env.config.get("persistent_cache") else " (off)"),
        "host memory: " + ("XLA's temporaries kept between executions (glibc's malloc set; "
                           "XLANB_HOST_MEMORY_REUSE=0 leaves it)" if env.host_memory else "the C library's defaults"),
        "JupyterLab extension: " + (("enabled" if env.extension_enabled else "disabled") + f" ({env.extension_path})"
                                    if env.extension_installed else "not installed"),
        f"Colab: {'yes' if env.colab else 'no'}",
        "config: " + ", ".join(f"{k}={val!r}" for k, val in env.config.items()),
    ]
    if env.problems:
        lines.append("problems:")
        lines += [f"  - {p}" for p in env.problems]
    else:
        lines.append("everything looks right")
    return "\n".join(lines)
