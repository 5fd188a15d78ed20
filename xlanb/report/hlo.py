"""Syntax highlighting for StableHLO / HLO / IR text: one regex, tokens -> `<span class>`.

Pygments has no HLO lexer. This one serves the HTML fallback (html.py); the widget and
JupyterLab highlight with labextension/src/highlight.ts, which holds the same PATTERN and
CLASSES (tests keep them identical), so every view colors the same tokens.
"""

from __future__ import annotations

import html
import re

# one alternative per token class; the TypeScript copy in labextension/src/highlight.ts must stay identical
PATTERN = (
    r"(?<c>//[^\n]*|/\*[^*]*\*/)"
    r"|(?<m>\b(?:metadata|backend_config|frontend_attributes)=\{[^\n]*?\}(?=,\s|\n|$)|\bloc\([^\n)]*\))"
    r"|(?<s>\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?<n>[%@^][\w.\-#]*\w|\barg\d+\b)"
    r"|(?<t>\btensor<[^>\n]*>|\b(?:pred|[su](?:4|8|16|32|64)|bf16|f8\w*|f16|f32|f64|c64|c128)\[[\d,]*\](?:\{[\d,]*\})?"
    r"|\b(?:i1|i8|i16|i32|i64|ui8|ui32|ui64|bf16|f16|f32|f64)\b)"
    r"|(?<k>\b(?:module|func\.func|return|ENTRY|ROOT|HloModule|public|private|attributes|cond|do|IR)\b)"
    r"|(?<o>\b(?:stablehlo|chlo|mhlo|func|sdy|aten|prims|xlanb)(?:\.|::)[\w.]+|\b[a-z][\w\-]*(?=\())"
    r"|(?<d>(?<![\w.%#])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?\b)"
)
_TOKEN = re.compile(PATTERN.replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!"))
CLASSES = {"c": "comment", "m": "meta", "s": "string", "n": "name", "t": "type", "k": "keyword", "o": "op",
           "d": "number"}


def highlight(text: str) -> str:
    """HTML-escaped `text` with tokens wrapped in `<span class="h-<kind>">`."""
    out, pos = [], 0
    for m in _TOKEN.finditer(text):
        start, end = m.span()
        if start == end:
            continue
        out.append(html.escape(text[pos:start], quote=False))
        out.append(f'<span class="h-{CLASSES[m.lastgroup]}">{html.escape(m.group(), quote=False)}</span>')
        pos = end
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)
