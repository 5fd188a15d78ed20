"""The magics: %%xla_compile, %%xla_compare, %xla_mode, %xla_report, %xla_metrics (runtime_magics.py has
the others)."""

from __future__ import annotations

import ast
import html
import sys

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from xlanb import hooks, metrics
from xlanb._config import config, set_config
from xlanb.report import Cells, rewrite_locations
from xlanb.report.format import format_ms

REPORT_STYLES = ("on", "off", "compact", "full")


def _leading_blank_lines(text: str) -> int:
    """Lines IPython's transform_cell drops from the start of a cell."""
    n = 0
    for line in text.splitlines():
        if line.strip():
            break
        n += 1
    return n


@magics_class
class XlaMagics(Magics):
    def __init__(self, shell, extension):
        super().__init__(shell)
        self.extension = extension

    @magic_arguments()
    @argument("--name", metavar="NAME",
              help="graph name (default: cell_<cell id>, or 'cell'); --max-graphs counts per name")
    @argument("--full-graph", action="store_true",
              help="any execution forced inside the cell (.item(), print, bool(), data-dependent ops) "
                   "raises, naming the cell line")
    @argument("--max-graphs", type=int, metavar="N",
              help="raise when the cell traces an (N+1)-th different graph; repeated runs count together")
    @cell_magic
    def xla_compile(self, line, cell):
        """Run the cell body as one named XLA graph: sugar for `with xlanb.compile(...)`.

        The body is traced lazily and compiled and launched as one graph when it ends. The
        value of its last expression is the cell's output, as usual. If the cell raises or
        is interrupted, every piece of runtime state is restored and its partial graph
        stays pending.

        Example::

            %%xla_compile --name train_step --full-graph
            loss = loss_fn(model(x), y)
            loss.backward(); opt.step(); opt.zero_grad()
            loss
        """
        args = parse_argstring(self.xla_compile, line)
        if args.max_graphs is not None and args.max_graphs < 1:
            raise UsageError(f"--max-graphs must be >= 1, got {args.max_graphs}")
        if args.name is not None and not args.name.strip():
            raise UsageError("--name must not be empty")
        name = args.name or self.extension.default_graph_name()
        self.extension.note_compiled_cell()
        try:
            # ops remember their cell line, so errors and the report can name it
            with hooks.recording_locations(), hooks.compile(name=name, full_graph=args.full_graph,
                                                            max_different_graphs=args.max_graphs):
                return self._run_body(cell)
        except (hooks.UnexpectedExecution, hooks.GraphLimitError) as error:
            if len(error.args) == 1 and isinstance(error.args[0], str):   # name cell lines, not temp files
                error.args = (rewrite_locations(error.args[0], self._cells()),)
            raise

    @magic_arguments()
    @argument("--rtol", type=float, metavar="R",
              help="relative tolerance (default: torch.testing.assert_close's for each dtype)")
    @argument("--atol", type=float, metavar="A",
              help="absolute tolerance (default: torch.testing.assert_close's for each dtype)")
    @cell_magic
    def xla_compare(self, line, cell):
        """Run the cell body inside `with xlanb.compare(rtol=..., atol=...)`: every op also runs on a
        CPU twin, and the cell report names the first op whose outputs differ although its inputs
        agreed, with its line, module and error, and the ops around it.

        The comparison is `_xla_compare` in the namespace (`_xla_compare.first_divergence`,
        `.rows`, `.ok`); the value of the body's last expression is the cell's output, as usual.

        Example::

            %%xla_compare --rtol 1e-4
            loss = model(x).sum()
            loss.backward()
        """
        args = parse_argstring(self.xla_compare, line)
        for name in ("rtol", "atol"):
            value = getattr(args, name)
            if value is not None and not 0 <= value < float("inf"):
                raise UsageError(f"--{name} must be a number >= 0, got {value}")
        # ops remember their cell line, so the report names it
        with hooks.recording_locations(), hooks.compare(rtol=args.rtol, atol=args.atol) as comparison:
            self.shell.user_ns["_xla_compare"] = comparison
            return self._run_body(cell)

    def _cells(self) -> Cells:
        return Cells(dict(getattr(self.shell.compile, "_filename_map", {})), self._cell_number())

    def _cell_number(self) -> int:
        """The execution count of the cell running this magic (IPython's code cache knows it)."""
        names = getattr(self.shell.compile, "_filename_map", {})
        f = sys._getframe(1)
        while f is not None:
            n = names.get(f.f_code.co_filename)
            if n is not None:
                return n
            f = f.f_back
        return self.shell.execution_count

    def _run_body(self, cell: str):
        """Runs the body like a cell; line numbers match the cell's (the magic is line 1)."""
        shell = self.shell
        transformed = shell.transform_cell(cell)
        source = "\n" * (1 + _leading_blank_lines(cell)) + transformed
        filename = shell.compile.cache(source, self._cell_number(), raw_code=source)
        tree = shell.compile.ast_parse(source, filename=filename)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(shell.compile(tree, filename, "exec"), shell.user_global_ns, shell.user_ns)
        if last is not None:
            expr = ast.Expression(last.value)
            return eval(shell.compile(expr, filename, "eval"), shell.user_global_ns, shell.user_ns)
        return None

    @line_magic
    def xla_mode(self, line):
        """%xla_mode eager|lazy: how cells run; with no argument, print the current mode.

        eager: every op is compiled (once per op and shape, cached) and run at once.
        lazy: ops are recorded and run at xlanb.sync() or when a value is needed.
        """
        arg = line.strip()
        if not arg:
            print("eager" if hooks.is_eager_mode() else "lazy")
            return
        if arg not in ("eager", "lazy"):
            raise UsageError(f"%xla_mode takes eager or lazy, got {arg!r}")
        hooks.eager_mode(arg == "eager")

    @line_magic
    def xla_report(self, line):
        """%xla_report on|off|compact|full: the report shown after each cell that used XLA.

        on: summary, notes and every compiled graph (IR, DAG, StableHLO, optimized HLO).
        compact: the summary and notes only. full: everything, nothing cut, eager op graphs too.
        With no argument, print the current setting.
        """
        arg = line.strip()
        if not arg:
            print(config().report)
            return
        if arg not in REPORT_STYLES:
            raise UsageError(f"%xla_report takes one of {', '.join(REPORT_STYLES)}, got {arg!r}")
        set_config(report=arg)

    @line_magic
    def xla_metrics(self, line):
        """%xla_metrics: every xlanb metric and counter (torch_xla's names) as a table."""
        if line.strip():
            raise UsageError(f"%xla_metrics takes no arguments, got {line.strip()!r}")
        from IPython.display import display
        display({"text/html": metrics_html(), "text/plain": metrics.metrics_report() or "no metrics yet"},
                raw=True)


def metrics_html() -> str:
    rows = []
    for name in metrics.metric_names():
        count, total, samples = metrics.metric_data(name)
        values = sorted(v for _, v in samples)
        timed = name.endswith("Time")
        fmt = (lambda v: format_ms(v / 1e6)) if timed else (lambda v: f"{v:g}")
        p50 = fmt(values[len(values) // 2]) if values else ""
        p90 = fmt(values[min(len(values) - 1, int(len(values) * 0.9))]) if values else ""
        rows.append(f"<tr><td>{html.escape(name)}</td><td>metric</td><td style='text-align:right'>{count}</td>"
                    f"<td style='text-align:right'>{fmt(total)}</td><td style='text-align:right'>{p50}</td>"
                    f"<td style='text-align:right'>{p90}</td></tr>")
    for name in metrics.counter_names():
        rows.append(f"<tr><td>{html.escape(name)}</td><td>counter</td>"
                    f"<td style='text-align:right'>{metrics.counter_value(name)}</td><td></td><td></td><td></td></tr>")
    if not rows:
        return "<p><b>xlanb</b> metrics: nothing recorded yet</p>"
    head = ("<tr><th>name</th><th>kind</th><th>samples / value</th><th>total</th><th>p50</th><th>p90</th></tr>")
    return f"<table class='xlanb-metrics'>{head}{''.join(rows)}</table>"
