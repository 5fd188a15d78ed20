"""`torch_xla.experimental`: eager mode (xlanb's own)."""

from xlanb.capture.modes import eager_mode, eager_mode_context, is_eager_mode

__all__ = ["eager_mode", "is_eager_mode", "eager_mode_context"]
