"""A seeded generator of short straight-line PyTorch programs over a few tensors.

A program is a list of statement strings run after a fixed prelude, with `d` bound to "cpu"
or "xla". Each candidate statement is executed on CPU as the program grows, and kept only if it
runs there, so every generated program is valid on CPU and shapes/dtypes are read from real
tensors instead of being modelled by hand.
"""

import random
from dataclasses import dataclass, field

import torch

PRELUDE = """\
import contextlib
import torch
import xlanb
if d == "xla":
    sync, eager, compiled = xlanb.sync, xlanb.eager_mode_context, xlanb.compile
else:
    sync, eager, compiled = (lambda: None), (lambda enable: contextlib.nullcontext()), (lambda f: f)
reads, errors = [], []
torch.manual_seed({seed})"""

# Statements that raise on CPU, kept in a try: the exception type is compared (`errors`).
RAISING = ["{x} - {y}", "{x} @ {x}", "{x}.view(5, -1)", "{x}[10]", "{x}.reshape(7)", "{x}.expand(3, 5)",
           "torch.cat([{x}, {x}.sum()])", "{x}.t().view(-1)", "{x}.sum(5)",
           "{x}.gather(0, torch.zeros(9, 9, 9, dtype=torch.long).to(d))"]
COMPILED = ["lambda p: p * 2 + 1", "lambda p: p.add_(1).mul(2)", "lambda p: (p > 0).sum()",
            "lambda p: p.reshape(-1)[1:].cumsum(0)", "lambda p: p.clone().mul_(-0.5)"]
OPTIMIZERS = ["torch.optim.SGD([w], lr=0.1, momentum=0.9)", "torch.optim.Adam([w], lr=0.05)",
              "torch.optim.AdamW([w], lr=0.05, weight_decay=0.1)"]

SCALARS = ["0", "1", "-1", "2", "2.5", "-0.5"]
UNARY = ["neg", "abs", "sin", "relu", "sigmoid", "tanh", "exp"]
FLOAT_ONLY = {"sin", "sigmoid", "tanh", "exp"}


@dataclass
class Program:
    seed: int
    statements: list = field(default_factory=list)

    def source(self, device: str | None = None) -> str:
        """Runnable Python; with `device` the first line binds `d`."""
        head = f'd = "{device}"\n' if device else ""
        return head + PRELUDE.format(seed=self.seed) + "\n" + "\n".join(self.statements) + "\n"

    def with_statements(self, statements):
        return Program(self.seed, list(statements))


def initial_statements(rng: random.Random) -> list:
    """The tensors every program starts from: made on CPU from the seeded generator, then moved."""
    out = ["a = torch.randn(4, 6).to(d)",
           f"b = torch.randn({rng.choice(['6', '1, 6', '4, 1'])}).to(d)",
           "c = torch.randint(-3, 4, (4, 1)).to(d)",
           "m = (torch.randn(4, 6) > 0).to(d)",
           "e = torch.randn(2, 3, 4).to(d)"]
    if rng.random() < 0.5:
        out.append("w = torch.randn(4, 6).to(d).requires_grad_()")
    return out


def run_cpu(program: Program) -> dict:
    """Executes `program` on CPU; returns its namespace (raises what the program raises)."""
    ns = {"d": "cpu"}
    exec(compile(program.source(), f"<fuzz {program.seed}>", "exec"), ns)
    return ns


def tensors_in(ns: dict) -> dict:
    return {k: v for k, v in ns.items() if isinstance(v, torch.Tensor) and not k.startswith("_")}


class _Gen:
    def __init__(self, rng, tensors, counter, growth=False):
        self.rng, self.t, self.counter, self.growth = rng, tensors, counter, growth

    def new(self):
        self.counter[0] += 1
        return f"t{self.counter[0]}"

    def pick(self, pred=lambda v: True):
        names = [k for k, v in self.t.items() if pred(v)]
        return self.rng.choice(names) if names else None

    def dim(self, v):
        return self.rng.randrange(v.dim()) if v.dim() else None

    def statement(self):
        r, pick = self.rng, self.pick
        if self.growth and r.random() < 0.4:
            return self.grow()
        x = pick()
        v = self.t[x]
        fl = v.is_floating_point()
        kind = r.choice(["unary", "scalar", "binary", "binary", "compare", "reduce", "reduce", "view", "view",
                         "view", "expand", "expand", "clone", "cumsum", "inplace", "inplace", "inplace", "index",
                         "index", "inplace_view", "inplace_view", "layout", "sync", "read", "grad_op", "misc",
                         "misc", "raising", "eager", "compiled", "optim", "product", "product", "fill"])
        n = self.new()
        if kind == "raising":
            y = pick()
            stmt = r.choice(RAISING).format(x=x, y=y)
            return f"try:\n    {n} = {stmt}\nexcept Exception as ex:\n    errors.append(type(ex).__name__)"
        if kind == "eager":           # one to three statements, run op by op
            body = [s for s in (self.statement() for _ in range(r.randint(1, 3))) if s and "\n" not in s]
            return "with eager(True):\n" + "\n".join("    " + s for s in body) if body else None
        if kind == "compiled":
            return f"{n} = compiled({r.choice(COMPILED)})({x})"
        if kind == "optim" and "w" in self.t and self.t["w"].is_leaf:
            return (f"w.grad = None\n({x} * w).sum().backward() if {x}.shape == w.shape else (w * 2).sum().backward()"
                    f"\n{r.choice(OPTIMIZERS)}.step()")
        if kind == "index" and v.dim():
            s = r.choice(SCALARS)
            y = pick()
            mask = pick(lambda t: t.dtype == torch.bool and t.shape == v.shape)
            rows = "torch.tensor([0, 2]).to(d)" if v.shape[0] >= 3 else "torch.tensor([0]).to(d)"
            options = [f"{x}[{rows}] = {s}", f"{x}[{x} > 0] = {s}", f"{x}.index_put_(({rows},), {y}[0])",
                       f"{n} = {x}[{rows}]", f"{n} = {x}.index_select(0, {rows})"]
            if mask:
                options += [f"{x}[{mask}] = {s}", f"{n} = {x}[{mask}]"]
            return r.choice(options)
        if kind == "layout":
            numel = v.numel()
            return r.choice([f"{x}.squeeze_()", f"{x}.resize_({max(numel // 2, 1)})" if numel else f"{x}.squeeze_()",
                             f"{x}.set_({pick(lambda t: t.dtype == v.dtype)})", f"{n} = {x}.contiguous().view(-1)",
                             f"{n} = {x}.mT.contiguous()", f"{n} = {x}.as_strided(({max(numel // 2, 1)},), (1,))"])
        if kind == "unary":
            op = r.choice([u for u in UNARY if fl or u not in FLOAT_ONLY])
            return f"{n} = {x}.{op}()" if op != "relu" else f"{n} = torch.relu({x})"
        if kind == "scalar":
            op, s = r.choice(["+", "-", "*", "/"]), r.choice(SCALARS)
            if op == "/" and s == "0":
                s = "2"
            return r.choice([f"{n} = {x} {op} {s}", f"{n} = {s} {op} {x}" if op != "/" else f"{n} = {x} / {s}"])
        if kind == "binary":
            y = pick()
            if v.dtype == torch.bool and self.t[y].dtype == torch.bool:
                return f"{n} = {x} {r.choice(['&', '|', '^'])} {y}"
            return f"{n} = {x} {r.choice(['+', '-', '*'])} {y}"
        if kind == "misc":
            y = pick()
            return r.choice([f"{n} = torch.where({pick(lambda t: t.dtype == torch.bool)}, {x}, {y})",
                             f"{n} = {x}.int() * 3", f"{n} = {x}.bool() | (c > 0)", f"{n} = c * 2.5 + {x}",
                             f"{n} = {x} + True", f"{n} = (c // 2) * {x}", f"{n} = torch.bitwise_and(c, 3) + {x}",
                             f"{n} = {x}.sum()", f"{n} = {x} ** 2", f"{n} = {x}.float()", f"{n} = {x}.long()",
                             f"{n} = {x} // 2", f"{n} = {x} % 3", f"{n} = {x}.permute(*reversed(range({x}.dim())))",
                             f"{n} = torch.maximum({x}, {y})", f"{n} = {x}.clamp(-1, 1)", f"{n} = {x}.mT"])
        if kind == "product" and fl and v.dim():
            # a product whose operand may be a fill: a constant of the graph until synced, which a CPU
            # library kernel once read out of bounds when a sum followed (docs/portability.md)
            k, s = v.shape[-1], r.choice(SCALARS)
            other = r.choice([f"{x}.mT" if v.dim() >= 2 else x, f"torch.ones({k}, 3, device=d)",
                              f"torch.full(({k}, 2), {s}, device=d)", f"torch.ones_like({x}).mT"])
            product = r.choice([f"{x} @ {other}", f"torch.ones_like({x}) @ {other}"])
            return f"{n} = " + r.choice([product, f"({product}).sum()", f"({product}).sum({r.choice([0, -1])})"])
        if kind == "fill":
            s = r.choice(SCALARS)
            return r.choice([f"{n} = torch.ones_like({x})", f"{n} = torch.full_like({x}, {s})",
                             f"{n} = torch.zeros({tuple(v.shape)}, device=d) + {s}"])
        if kind == "compare":
            return f"{n} = {x} {r.choice(['>', '<', '==', '>='])} {r.choice([pick(), r.choice(SCALARS)])}"
        if kind == "reduce" and v.dim():
            op = r.choice(["sum", "mean", "amax", "prod", "std", "logsumexp"] if fl else
                          ["sum", "amax", "prod", "any", "all"])
            if r.random() < 0.25:
                return f"{n} = {x}.{r.choice(['max', 'min'])}({self.dim(v)}).values" if v.dtype != torch.bool else \
                    f"{n} = {x}.argmax() if {x}.dtype != torch.bool else {x}.sum()"
            return f"{n} = {x}.{op}({self.dim(v)}{', keepdim=True' if r.random() < 0.5 else ''})"
        if kind == "view" and v.dim():
            k = self.dim(v)
            size = v.shape[k]
            s = r.randrange(size) if size else 0
            return r.choice([
                f"{n} = {x}.t()" if v.dim() <= 2 else f"{n} = {x}.transpose(0, 1)",
                f"{n} = {x}[{s}:]", f"{n} = {x}[:, {s}:]" if v.dim() >= 2 else f"{n} = {x}[::2]",
                f"{n} = {x}.select({k}, {s})", f"{n} = {x}.reshape(-1)",
                f"{n} = {x}.reshape({v.shape[0]}, -1)", f"{n} = {x}.unsqueeze({r.randrange(v.dim() + 1)})",
                f"{n} = {x}.squeeze({k})", f"{n} = {x}.transpose({k}, {self.dim(v)})",
                f"{n} = {x}.narrow({k}, {s}, {max(size - s - r.randrange(2), 1) if size else 0})",
                f"{n} = {x}[..., :1]", f"{n} = {x}.detach()", f"{n} = {x}.view(-1)", f"{n} = {x}.contiguous()",
                f"{n} = {x}.as_strided((2, 2), (1, 2))", f"{n} = {x}.as_strided((2, 3), (1, 2), 1)"])
        if kind == "expand" and v.dim():
            return f"{n} = {x}[..., :1].expand_as({x}) + {x}"
        if kind == "clone":
            return f"{n} = {x}.clone()"
        if kind == "cumsum" and v.dim():
            return f"{n} = {x}.cumsum({self.dim(v)})"
        if kind == "inplace":
            y = pick()
            s = r.choice(SCALARS)
            if v.dim():
                k = self.dim(v)
                st = r.randrange(v.shape[k]) if v.shape[k] else 0
                idx = ", ".join([":"] * k + [f"{st}:"])
            else:
                idx = "..."
            return r.choice([f"{x}.add_({y})", f"{x}.add_({s})", f"{x}.mul_({s})", f"{x}.mul_({y})",
                             f"{x}.copy_({y})", f"{x}.masked_fill_({pick(lambda t: t.dtype == torch.bool)}, {s})",
                             f"{x}[{idx}] = {s}", f"{x}[{idx}] = {y}"])
        if kind == "inplace_view":
            if v.dim() >= 2:
                k = self.dim(v)
                st = r.randrange(v.shape[k]) if v.shape[k] else 0
                return r.choice([f"{x}.t_()" if v.dim() == 2 else f"{x}.transpose_(0, 1)",
                                 f"{x}.transpose_({k}, {self.dim(v)})", f"{x}.unsqueeze_({r.randrange(v.dim() + 1)})",
                                 f"{x}.diagonal().add_({r.choice(SCALARS)})",
                                 f"{x}.narrow({k}, {st}, 1).add_({r.choice(SCALARS)})"])
            return f"{x}.unsqueeze_(0)"
        if kind == "sync":
            return "sync()"
        if kind == "read":
            return r.choice([f"reads.append({x}.sum().item())", f"reads.append({x}.tolist())"])
        if kind == "grad_op" and "w" in self.t:
            w = pick(lambda t: t.requires_grad) or "w"
            return r.choice([f"{n} = {w}.t()[1:] * 2.5", f"{n} = {w}[:, :3].exp()", f"{n} = {w}.transpose(0, 1) * {x}",
                             f"{n} = {w}.unsqueeze(0).sum(1)", f"{n} = {w}.narrow(1, 1, 2) * {w}.narrow(1, 2, 2)"])
        return None


    def grow(self):
        """The decode-loop family (`--growth`): tensors grown by cat along one dim, read at their ends."""
        r = self.rng
        x = self.pick(lambda t: t.dim() >= 1 and t.numel() > 0)
        if x is None:
            return None
        v = self.t[x]
        d = r.randrange(v.dim())
        n = self.new()
        k = r.randrange(1, 3)
        end = f"{x}.narrow({d}, {x}.shape[{d}] - 1, 1)"
        return r.choice([
            f"{x} = torch.cat([{x}, {end} * 2], {d})",
            f"{x} = torch.cat([{x}, {x}.narrow({d}, 0, 1) + 1], {d - v.dim()})",
            f"{x} = torch.cat([{end}, {x}], {d})",
            f"{n} = {x}.narrow({d}, {x}.shape[{d}] - {k}, {k}) if {x}.shape[{d}] >= {k} else {x}",
            f"{n} = {x}.select({d}, -1)", f"{n} = {x}.select({d}, 0)",
            f"{n} = {x}[..., -1:]", f"{n} = {x}[..., 1:]", f"{n} = {x}.sum({d})",
            f"reads.append({x}.select({d}, -1).sum().item())",
        ])


def generate(seed: int, min_len: int = 10, max_len: int = 25, growth: bool = False) -> Program:
    """A program of `min_len`..`max_len` statements, valid on CPU, chosen by `seed` alone."""
    rng = random.Random(seed)
    prog = Program(seed, initial_statements(rng))
    target = len(prog.statements) + rng.randint(min_len, max_len) - 4
    ns = run_cpu(prog)
    counter, tries = [0], 0
    while len(prog.statements) < target and tries < 200:
        tries += 1
        stmt = _Gen(rng, tensors_in(ns), counter, growth).statement()
        if stmt is None:
            continue
        candidate = prog.with_statements(prog.statements + [stmt])
        try:
            ns = run_cpu(candidate)
        except Exception:
            ns = run_cpu(prog)              # a failing statement may have mutated state before raising
            continue
        prog = candidate
    grads = [k for k, v in tensors_in(ns).items() if v.requires_grad and v.grad_fn is not None]
    if grads:
        candidate = prog.with_statements(prog.statements + [f"{rng.choice(grads)}.sum().backward()"])
        try:
            run_cpu(candidate)
            prog = candidate
        except Exception:
            pass
    return prog
