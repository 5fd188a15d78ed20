"""`torch_xla.debug.profiler` (xp): Trace and StepTrace as timers; no profiler server."""

from xlanb.compat.profiler import StepTrace, Trace, get_tracer_marked_step, set_tracer_marked_step, start_server, \
    start_trace, stop_trace, trace_me
