"""torch's OpInfo database as the referee: every sample on `xla` gives torch CPU's answer.

Default (inside `make test`): SUBSET below, float32, forward and backward, plus a few ops
in bfloat16 and complex64 forward, the first 3 samples of each. `pytest tests/ops --ops-full` (or OPS_FULL=1) runs every OpInfo in
float32, int64, bool, bfloat16 and complex64 forward and float32 backward; tools/ops_sweep.py runs the
same sweep in worker processes and writes docs/ops.md (`make test-ops-full`).

Samples that fail are test failures; the only way around one is an entry in
tests/ops/skips.py, with its reason.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

SUBSET = (
    "add", "sub", "mul", "div.no_rounding_mode", "matmul", "mm", "bmm", "addmm", "nn.functional.linear",
    "nn.functional.conv2d", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "tanh", "sigmoid",
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.batch_norm", "nn.functional.group_norm",
    "nn.functional.embedding", "nn.functional.cross_entropy", "nn.functional.mse_loss", "nn.functional.dropout",
    "sum", "mean", "amax", "argmax", "cat", "stack", "reshape", "transpose", "permute", "index_select", "gather",
    "scatter_add", "where", "masked_fill", "nonzero", "masked_select", "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "nn.functional.interpolate.bilinear", "cumsum", "topk", "sort", "exp", "log",
    "sqrt", "pow", "clamp", "abs", "cos", "fft.rfft", "nn.functional.scaled_dot_product_attention",
    "index_put", "nn.functional.pad.constant", "einsum", "linalg.vector_norm", "var_mean", "cumprod",
    "max.reduction_with_dim", "unique", "rsqrt", "erf", "baddbmm", "split", "expand", "repeat", "roll", "flip",
    "tril", "arange", "full", "nn.functional.embedding_bag", "nn.functional.one_hot", "bernoulli",
)
# Half precision and complex matter for models too: a few ops run forward in those dtypes.
SUBSET_DTYPES = {"bfloat16": ("matmul", "softmax", "nn.functional.layer_norm", "nn.functional.conv2d", "add", "sum"),
                 "complex64": ("mul", "matmul", "fft.rfft", "sum", "abs")}
SUBSET_SAMPLES = 3
FULL_SAMPLES = 4


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    dtype: str
    direction: str
    limit: int

    @property
    def id(self) -> str:
        return f"{self.name}-{self.dtype}-{self.direction}"


@functools.lru_cache(maxsize=1)
def _ops() -> dict:
    from torch.testing._internal.common_methods_invocations import op_db
    import harness
    return {harness.full_name(o): o for o in op_db}


def cases(full: bool) -> list[Case]:
    import harness
    ops = _ops()
    out = []
    if not full:
        for name in SUBSET:
            for direction in ("fwd", "bwd"):
                if harness.supports(ops[name], "float32", direction):
                    out.append(Case(name, "float32", direction, SUBSET_SAMPLES))
        for dtype, names in SUBSET_DTYPES.items():
            out += [Case(name, dtype, "fwd", SUBSET_SAMPLES) for name in names if harness.supports(ops[name], dtype, "fwd")]
        return out
    for name, op in ops.items():
        for dtype in ("float32", "int64", "bool", "bfloat16", "complex64"):
            if harness.supports(op, dtype, "fwd"):
                out.append(Case(name, dtype, "fwd", FULL_SAMPLES))
        if harness.supports(op, "float32", "bwd"):
            out.append(Case(name, "float32", "bwd", FULL_SAMPLES))
    return out


def test_opinfo(opinfo_case: Case, request):
    import harness
    limit = request.config.getoption("--ops-samples") or opinfo_case.limit
    results = harness.run_op(_ops()[opinfo_case.name], opinfo_case.dtype, opinfo_case.direction, limit)
    if results and all(r.status == "skip" for r in results):
        pytest.skip(results[0].message)
    bad = [r for r in results if r.status in ("fail", "error")]
    if bad:
        lines = [f"sample {r.index}: {r.status}: {r.message}" for r in bad]
        pytest.fail(f"{len(bad)} of {len(results)} samples of {opinfo_case.id} differ from torch CPU:\n"
                    + "\n".join(lines), pytrace=False)


def test_subset_names_exist():
    missing = [n for n in SUBSET + sum(SUBSET_DTYPES.values(), ()) if n not in _ops()]
    assert not missing, f"not in op_db: {missing}"


def test_skip_table_names_exist():
    from skips import METADATA_ONLY, RANDOM_WHEN, SKIPS, TIES, TOLERANCE
    names = {(o.name, o.variant_test_name) for o in _ops().values()}
    full = set(_ops())
    assert not [k for k in SKIPS if (k[0], k[1]) not in names]
    assert not [k for k in list(METADATA_ONLY) + list(RANDOM_WHEN) + list(TIES) if k not in full]
    assert not [k for k in TOLERANCE if k[0] not in full]
    assert all(isinstance(v, str) and v for v in SKIPS.values()), "every skip needs a reason"


def test_sweep_tool_runs(tmp_path):
    """tools/ops_sweep.py (make test-ops-full) end to end on two ops, in one worker."""
    import json
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    out = tmp_path / "sweep.json"
    proc = subprocess.run([sys.executable, str(root / "tools" / "ops_sweep.py"), "--ops", "abs,nonzero",
                           "--samples", "1", "--jobs", "1", "--json", str(out), "--quiet", "--check"],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert {r["op"] for r in data["results"]} == {"abs", "nonzero"}
    assert all(r["status"] in ("pass", "n/a") for r in data["results"])


def test_core_aten_covered():
    """Every overload tagged torch.Tag.core has a lowering rule, or capture or a torch
    decomposition handles it: none of the core set has to run on the CPU."""
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
    import ops_sweep
    core = ops_sweep.core_aten_coverage()
    assert core["missing"] == []
    assert core["counts"]["rule"] >= 175, core["counts"]
