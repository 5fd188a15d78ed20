"""`torch_xla.debug.metrics` (met): xlanb.metrics, which already uses torch_xla's counter and
metric names (CompileTime, ExecuteTime, CachedCompile, UncachedCompile, MarkStep, ...)."""

from xlanb.compat.counters import save_metrics
from xlanb.metrics import (clear_all, clear_counters, clear_metrics, counter_names, counter_value,
                           executed_fallback_ops, metric_data, metric_names, metrics_report, short_metrics_report)
