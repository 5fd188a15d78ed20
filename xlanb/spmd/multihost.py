"""Several hosts (or several processes on one machine) as one mesh, on JAX's multi-controller
runtime: every process runs the same program; `jax.devices()` lists all processes' devices."""

from __future__ import annotations

import jax

from xlanb._config import config
from xlanb.state import runtime_state


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids=None, *, cpu_collectives: str = "gloo") -> None:
    """`jax.distributed.initialize(...)` (on a TPU pod every argument is found automatically).
    Call it first, before any tensor reaches the xla device. On the CPU, collectives across
    processes go through `cpu_collectives` (JAX's gloo)."""
    if (config().platform or "cpu") == "cpu":
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    try:
        jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                                   process_id=process_id, local_device_ids=local_device_ids)
    except RuntimeError as e:
        raise RuntimeError(f"xlanb.spmd.initialize: {e}. Call it at the top of the program, before any "
                           "tensor is moved to the xla device (JAX's backends start once per process).") from e
    rt = runtime_state()
    rt._jax_devices.clear()
    rt.several_devices = None


def process_index() -> int:
    return jax.process_index()


def process_count() -> int:
    return jax.process_count()


def global_device_count() -> int:
    return len(jax.devices(config().platform or None))
