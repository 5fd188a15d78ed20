"""torch.compile(backend="xlanb") through the package's torch_dynamo_backends entry point: it works in
a process that never imported xlanb (torch's registry imports it), and `import xlanb` leaves
torch.compile as torch defined it and imports no torch._dynamo."""

import json
import subprocess
import sys
import textwrap

from importlib.metadata import entry_points


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_entry_point_is_installed():
    (ep,) = [e for e in entry_points(group="torch_dynamo_backends") if e.name == "xlanb"]
    assert ep.value == "xlanb.dynamo.entry:backend"


def test_backend_xlanb_works_in_a_process_that_never_imported_xlanb():
    out = run("""
        import json, sys
        import torch

        def step(x, w):
            return (x @ w).relu().sum()

        before = "xlanb" in sys.modules
        compiled = torch.compile(step, backend="xlanb")
        imported = "xlanb" in sys.modules
        import xlanb
        torch.manual_seed(0)
        x, w = torch.randn(4, 8), torch.randn(8, 3)
        got = compiled(x.to("xla"), w.to("xla"))
        xlanb.sync()
        print(json.dumps({"before": before, "imported": imported, "got": got.item(), "want": step(x, w).item(),
                          "compiles": xlanb.metrics.metric_data("CompileTime")[0]}))
    """)
    assert out["before"] is False and out["imported"] is True and out["compiles"] == 1
    assert abs(out["got"] - out["want"]) <= 1e-4 * max(1.0, abs(out["want"]))


def test_import_xlanb_leaves_torch_compile_and_imports_no_dynamo():
    out = run("""
        import json, sys
        import torch
        original = torch.compile
        import xlanb
        x = (torch.ones(3, device="xla") * 2).sum().item()
        print(json.dumps({"same": torch.compile is original, "module": torch.compile.__module__,
                          "dynamo": "torch._dynamo" in sys.modules, "x": x}))
    """)
    assert out == {"same": True, "module": "torch", "dynamo": False, "x": 6.0}
