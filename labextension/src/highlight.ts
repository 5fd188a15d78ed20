/**
 * Syntax highlighting for StableHLO / HLO / IR text: one regex, tokens -> <span class="h-KIND">.
 * JupyterLab and the report widget (its bundle is built from this file) highlight with it; the
 * HTML fallback has a Python copy of PATTERN and CLASSES (xlanb/report/hlo.py), which
 * tests/labextension/test_labextension_package.py keeps identical.
 */

// prettier-ignore
export const PATTERN = "(?<c>//[^\\n]*|/\\*[^*]*\\*/)|(?<m>\\b(?:metadata|backend_config|frontend_attributes)=\\{[^\\n]*?\\}(?=,\\s|\\n|$)|\\bloc\\([^\\n)]*\\))|(?<s>\\\"(?:[^\\\"\\\\\\n]|\\\\.)*\\\")|(?<n>[%@^][\\w.\\-#]*\\w|\\barg\\d+\\b)|(?<t>\\btensor<[^>\\n]*>|\\b(?:pred|[su](?:4|8|16|32|64)|bf16|f8\\w*|f16|f32|f64|c64|c128)\\[[\\d,]*\\](?:\\{[\\d,]*\\})?|\\b(?:i1|i8|i16|i32|i64|ui8|ui32|ui64|bf16|f16|f32|f64)\\b)|(?<k>\\b(?:module|func\\.func|return|ENTRY|ROOT|HloModule|public|private|attributes|cond|do|IR)\\b)|(?<o>\\b(?:stablehlo|chlo|mhlo|func|sdy|aten|prims|xlanb)(?:\\.|::)[\\w.]+|\\b[a-z][\\w\\-]*(?=\\())|(?<d>(?<![\\w.%#])-?\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?\\b)";

// prettier-ignore
export const CLASSES: Record<string, string> = {"c": "comment", "m": "meta", "s": "string", "n": "name", "t": "type", "k": "keyword", "o": "op", "d": "number"};

/** HTML-escapes text (also quotes, so the result is safe inside attributes). */
export function escapeHtml(text: string): string {
  return String(text).replace(
    /[&<>"']/g,
    c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string
  );
}

/** `text` HTML-escaped, with each token wrapped in <span class="h-KIND">. */
export function highlight(text: string): string {
  const re = new RegExp(PATTERN, 'g');
  let out = '';
  let pos = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    if (m[0].length === 0) {
      re.lastIndex++;
      continue;
    }
    const groups = m.groups ?? {};
    const kind = Object.keys(groups).find(k => groups[k] !== undefined) ?? '';
    out += escapeHtml(text.slice(pos, m.index));
    out += `<span class="h-${CLASSES[kind] ?? kind}">${escapeHtml(m[0])}</span>`;
    pos = m.index + m[0].length;
  }
  return out + escapeHtml(text.slice(pos));
}
