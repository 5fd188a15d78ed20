"""`torch_xla.distributed.xla_multiprocessing` (xmp): spawn over jax.distributed processes."""

from xlanb.compat.spawn import spawn


class MpModelWrapper:
    """torch_xla's helper for fork-started replicas: `.to(device)` moves the wrapped model."""

    def __init__(self, model):
        self._model = model

    def to(self, device):
        return self._model.to(device)
