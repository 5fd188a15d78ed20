"""The stages of a graph on its way to the device, in JAX's vocabulary (jax.stages).

`Lowered` is a graph lowered to StableHLO through the lowering table; `Compiled` is its XLA
executable. `as_text`, `cost_analysis`, `fusion_costs` and `memory_analysis` are for visualisation and
debugging; they return None where the backend gives nothing. The runtime copies what a
report needs out of them into plain events: no event holds a stage object.
"""

from __future__ import annotations

import os
import re

import jax
from jax._src.array import ArrayImpl as _ARRAY     # the type of a device buffer

from xlanb.runtime.fusion_cost import MAX_FUSIONS, fusion_costs
from xlanb.state import runtime_state

_MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes",
                  "generated_code_size_in_bytes")


# compile_effort="fast": what XLA is told, per platform. Every platform: XLA's optimization effort
# level O0 (https://openxla.org/xla/effort_levels; JAX's jax_optimization_level, which takes it as a
# compile option from jax 0.10 to 0.12: the enum's value 9). CPU: LLVM's optimization level 0 as
# well (most of a CPU compile is LLVM's), and XLA's older elemental emitters instead of its MLIR
# fusion emitters (W7's graph at O0: 1.07-1.18 -> 0.94-0.97 s of XLA's compile; fast's steady steps
# are slower than before, W3 and W4 1.45x default's against 1.14x and 1.28x; at the default effort the
# older emitters compile W7 slower, 3.5-5.0 s against 2.0; jax 0.12 has no such option). GPU: no
# autotuning of kernels (XLA times candidate kernels of each matmul and fusion otherwise).
_O0 = 9
_FAST = {
    "cpu": {"optimization_level": _O0, "xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False},
    "gpu": {"optimization_level": _O0, "xla_gpu_autotune_level": 0},
}
_FAST_OTHER = {"optimization_level": _O0}

# Every CPU compile, whatever the effort: no YNNPACK fusions. XLA:CPU (jax 0.10.2 to 0.12) fuses a
# reduction with the dot that feeds it into one YNNPACK subgraph, and a dot operand that is a
# broadcast constant (a tensor made by torch.ones or full and not synced yet, or one XLA folds to a
# constant) is then read out of bounds: `(ones(64, 32) @ ones(32, 64)).sum()` gives 4096 or garbage
# instead of 131072, larger shapes NaN or a segmentation fault (docs/portability.md, "XLA:CPU's
# YNNPACK fusions"). Without them the dots and reductions take XLA's own kernels. A user's
# XLA_FLAGS that sets the flag is left to rule.
_YNN = "xla_cpu_experimental_ynn_fusion_type"
_CPU_ALWAYS = {_YNN: ""}
# Every CPU compile of an eager op's graph: XLA's elemental emitters instead of its MLIR fusion emitters.
# A one-op module costs the fusion emitters ~10 ms more to compile (pure JAX, jax 0.10.2: an add of
# f32[4,128,256] 30 -> 20 ms, gelu 28 -> 20 ms), eager mode compiles one per new op and shape, and the
# kernels give the same bits at the same speed (tanh, gelu, softmax, a sum, an Adam-like update, matmul:
# 0.83x-1.09x their time, docs/performance.md). Not for a larger graph: W7's whole step compiles in
# 3.5-5.0 s with the elemental emitters against 2.0. jax 0.12's XLA has no such option (it is dropped: `_compile`).
_CPU_OP_GRAPH = {"xla_cpu_use_fusion_emitters": False}
_UNKNOWN_OPTION = re.compile(r"No such compile option: '([^']+)'")
_unsupported: set = set()      # options this jaxlib's XLA refused: left out from then on


def compile_options(effort: str, op_graph: bool = False) -> dict:
    """XLA's compiler options for a compile_effort on the runtime's platform (docs/config.md): on the
    CPU the ones every compile takes (`_CPU_ALWAYS`) and those of an eager op's graph (`op_graph`:
    `_CPU_OP_GRAPH`), and those of "fast"."""
    platform = runtime_state().jax_device().platform
    flags = os.environ.get("XLA_FLAGS", "")
    options = {}
    if platform == "cpu":
        options.update({k: v for k, v in _CPU_ALWAYS.items() if k not in flags})
        if op_graph:
            options.update({k: v for k, v in _CPU_OP_GRAPH.items() if k not in flags})
    if effort != "default":
        options.update(_FAST.get("gpu" if platform in ("cuda", "rocm", "gpu") else platform, _FAST_OTHER))
    return {k: v for k, v in options.items() if k not in _unsupported}


def cpu_dot_kernels() -> bool:
    """Whether graphs compile for XLA's CPU with its own dot kernels (Eigen's): the runtime's platform
    is the CPU and YNNPACK's fusions are off (`_CPU_ALWAYS`; a user's XLA_FLAGS that names them rules)."""
    return runtime_state().jax_device().platform == "cpu" and _YNN not in os.environ.get("XLA_FLAGS", "")


def _compile(jax_lowered, options: dict):
    """jax's compile with `options`, less any that this jaxlib's XLA does not know (it refuses the
    whole compile for one): each such option is dropped, remembered and the compile tried again."""
    while True:
        try:
            return jax_lowered.compile(compiler_options=options) if options else jax_lowered.compile()
        except jax.errors.JaxRuntimeError as error:
            unknown = _UNKNOWN_OPTION.search(str(error))
            if unknown is None or unknown.group(1) not in options:
                raise
            _unsupported.add(unknown.group(1))
            options = {k: v for k, v in options.items() if k != unknown.group(1)}


def run_jitted(fn, *args):
    """`jax.jit(fn)(*args)` compiled with the options every compile of the platform takes
    (`compile_options`): for the runtime's own helper programs (debug_nans' probe), which JAX's jit
    would compile without them. Compiled each call: for rare paths only."""
    with jax.enable_x64(True):
        return _compile(jax.jit(fn).lower(*args), compile_options("default"))(*args)


class Lowered:
    """A graph as StableHLO: jax's Lowered of the graph's pure function."""

    __slots__ = ("name", "digest", "jax_lowered", "n_floats", "n_ints", "mesh")

    def __init__(self, name: str, digest: str, jax_lowered, n_floats: int, n_ints: int, mesh=None):
        self.name, self.digest, self.jax_lowered = name, digest, jax_lowered
        self.n_floats, self.n_ints = n_floats, n_ints
        self.mesh = mesh            # the jax Mesh of a partitioned graph (None: one device)

    def as_text(self, dialect: str = "stablehlo") -> str:
        if dialect not in ("stablehlo", "hlo"):
            raise ValueError(f"dialect must be 'stablehlo' or 'hlo', got {dialect!r}")
        return self.jax_lowered.as_text() if dialect == "stablehlo" else self.jax_lowered.as_text(dialect="hlo")

    def compile(self, effort: str = "default", op_graph: bool = False) -> "Compiled":
        """The XLA executable, optimized as hard as `effort` says (`compile_options`; `op_graph`: an
        eager op's graph)."""
        with jax.enable_x64(True):
            executable = _compile(self.jax_lowered, compile_options(effort, op_graph))
        compiled = Compiled(self.name, self.digest, executable)
        if self.mesh is not None:
            compiled.in_shardings = tuple(executable.input_shardings[0])
        return compiled


class Compiled:
    """An XLA executable: call it with (*input buffers, [float scalars], [int scalars])."""

    __slots__ = ("name", "digest", "executable", "in_shardings", "key", "host_calls", "__weakref__")

    def __init__(self, name: str, digest: str, executable):
        self.name, self.digest, self.executable = name, digest, executable
        self.in_shardings = None    # on a mesh: the argument shardings it expects (runtime/partition.py)
        # the CacheKey object the executable cache stores it under (runtime/cache.py): a lookup with that
        # very object finds it without comparing the key's entries (a replayed call looks up every call)
        self.key = None
        # it runs CPU fallback ops (host callbacks), whose torch errors surface when it executes: each
        # launch is waited for (executor.call), so an asynchronous device raises at the launch too
        self.host_calls = False

    def __call__(self, *args):
        for a in args:
            if type(a) is not _ARRAY:       # a host vector of 64-bit scalars: kept 64-bit on the way in
                with jax.enable_x64(True):
                    return self.executable(*args)
        return self.executable(*args)       # device buffers keep their dtypes (the context costs ~2 us)

    def as_text(self) -> str:
        """The optimized HLO, after XLA's passes."""
        return self.executable.as_text()

    def cost_analysis(self) -> dict | None:
        try:
            cost = self.executable.cost_analysis()
        except Exception:   # backends without cost analysis raise assorted errors
            return None
        if isinstance(cost, list):
            cost = cost[0] if cost else None
        return dict(cost) if cost else None

    def fusion_costs(self, optimized: str) -> tuple:
        """XLA's cost analysis of each fusion of `optimized` (this executable's `as_text()`), the
        first MAX_FUSIONS of them (runtime/fusion_cost.py)."""
        try:
            client = self.executable.runtime_executable().client
        except Exception:   # as above
            return ()
        return fusion_costs(optimized, client, MAX_FUSIONS)

    def memory_analysis(self) -> dict | None:
        try:
            mem = self.executable.memory_analysis()
        except Exception:   # as above: optional per backend
            return None
        if mem is None:
            return None
        return {f: getattr(mem, f) for f in _MEMORY_FIELDS if hasattr(mem, f)}
