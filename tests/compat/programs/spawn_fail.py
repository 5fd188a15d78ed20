"""A replica that fails: xmp.spawn raises in the parent, naming the process and its error."""

import torch_xla.distributed.xla_multiprocessing as xmp


def _mp_fn(index):
    if index == 1:
        raise ValueError("replica 1 fails on purpose")


if __name__ == "__main__":
    try:
        xmp.spawn(_mp_fn, nprocs=2)
    except RuntimeError as e:
        import json
        print("RESULT " + json.dumps({"type": type(e).__name__, "error": str(e)}))
