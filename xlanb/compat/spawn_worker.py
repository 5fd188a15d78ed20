"""One replica of `xmp.spawn` (spawn.py): `python -m xlanb.compat.spawn_worker PAYLOAD RANK`.

Order matters: jax.distributed starts before anything touches a device, and the compat layer is
installed before the main script is imported (a torch_xla script imports torch_xla at its top).
"""

from __future__ import annotations

import os
import pickle
import runpy
import sys
import types


def _import_main(main: dict) -> None:
    """The parent's main module, as `__mp_main__` and `__main__` (its `if __name__ == '__main__'`
    block does not run), so `fn` pickled by name as `__main__.fn` is found."""
    if "module" in main:
        namespace = runpy.run_module(main["module"], run_name="__mp_main__", alter_sys=False)
    else:
        sys.path.insert(0, os.path.dirname(main["path"]))
        namespace = runpy.run_path(main["path"], run_name="__mp_main__")
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(namespace)
    sys.modules["__mp_main__"] = sys.modules["__main__"] = module


def main(payload_path: str, rank: int) -> None:
    import xlanb.compat
    from xlanb.compat import devices
    from xlanb.spmd import multihost

    with open(payload_path, "rb") as f:
        meta = pickle.load(f)
        xlanb.compat.install()
        multihost.initialize(f"127.0.0.1:{meta['port']}", num_processes=meta["nprocs"], process_id=rank)
        devices.replica.world_size, devices.replica.ordinal = meta["nprocs"], rank
        os.chdir(meta["cwd"])
        sys.argv = meta["argv"]
        for setup, setup_args in meta.get("setup", ()):
            setup(*setup_args)
        _import_main(meta["main"])
        fn, args = pickle.load(f)
    fn(rank, *args)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
