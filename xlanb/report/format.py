"""Numbers and lists as the report writes them, shared by text.py and html.py.

labextension/src/dom.ts has the same functions (formatMs, formatCallMs, formatError, formatBytes,
plural, tensorsText), so the widget, JupyterLab, the HTML fallback and the text read alike.
"""

from __future__ import annotations

TENSORS_SHOWN = 6       # tensors listed before "... (N in all)"


def plural(n: int, word: str) -> str:
    """`1 graph`, `2 graphs`, `2 misses`, `3 boxes`."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{n} {word}s"


def format_ms(ms: float) -> str:
    """`0.42 ms`, `12.3 ms`, `1.25 s`."""
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.1f} ms" if ms >= 1 else f"{ms:.2f} ms"


def format_call_ms(ms: float) -> str:
    """A short time per call: `66 \u00b5s` under 0.1 ms, else as format_ms (`0.21 ms`)."""
    return f"{ms * 1000:.0f} \u00b5s" if ms < 0.1 else format_ms(ms)


def format_error(x: float) -> str:
    """An op's error against its CPU twin: `0`, `0.031`, `12.5`, `1.00e-07`, `inf`, `nan`."""
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    if x == 0:
        return "0"
    return f"{x:.3g}" if 1e-3 <= abs(float(f"{x:.3g}")) < 1e3 else f"{x:.2e}"


def format_bytes(n: float) -> str:
    """`512 B`, `1.5 KiB`, ... up to GiB."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def format_flops(n: float) -> str:
    """`512 FLOP`, `4.19 MFLOP`, ... up to TFLOP."""
    for unit in ("FLOP", "kFLOP", "MFLOP", "GFLOP"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "FLOP" else f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} TFLOP"


def tensors_text(tensors) -> str:
    """`f32[8,16], i64[8]`: the first few tensors' text, `()` for none."""
    if not tensors:
        return "()"
    shown = ", ".join(t.text for t in tensors[:TENSORS_SHOWN])
    return shown + f", ... ({len(tensors)} in all)" if len(tensors) > TENSORS_SHOWN else shown


def at_where(where) -> str:
    """` at cell line 3` for a Where, "" for None."""
    return f" at {where.text}" if where else ""
