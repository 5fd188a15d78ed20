"""torch_xla's examples and doc pages through the referee's runner (`python tools/torch_xla_referee.py
--examples / --docs CHECKOUT`), on a small stand-in checkout: each runs unchanged on xlanb and as its
CPU twin, with the losses, the tensors and the compiles per step compared. And what running the real
examples found: a loss printed with f"{loss}" (the examples' progress line) formats as its number,
and many programs with collectives in flight on 8 CPU devices finish (eager mode on a mesh)."""

import os
import sys
import textwrap

import pytest
import torch

from conftest import PROGRAMS, result_of, run_python

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import torch_xla_referee as referee  # noqa: E402  (a tool beside tools/torch_suites.py, not part of the package)

TRAIN = '''
import itertools
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.utils.utils as xu

device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
data = (torch.arange(128.0).reshape(16, 8) / 128, torch.arange(16) % 4)
loader = pl.MpDeviceLoader(xu.SampleGenerator(data=data, sample_count=100), device)


def step_fn(x, y):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def report(step, loss):
    print(f"epoch: 1, step: {step}, loss: {loss}, rate: 0")


step_fn = torch_xla.compile(step_fn, full_graph=True, name="step_fn")
for step, (x, y) in enumerate(itertools.islice(loader, 12)):
    loss = step_fn(x, y)
    if step % 5 == 0:
        xm.add_step_closure(report, args=(step, loss))
'''

PAGE = '''
# A page

```python
import torch
import torch_xla

device = torch_xla.device()
model = torch.nn.Linear(8, 4).to(device)
input = torch.randn(16, 8).to(device)
res = model(input)
torch_xla.sync()
```

Text between the blocks.

``` python
compiled_model = torch_xla.compile(model)
res = compiled_model(input * 2)
```
'''


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkout")
    (root / "examples").mkdir()
    (root / "examples" / "train_tiny.py").write_text(textwrap.dedent(TRAIN))
    (root / "docs").mkdir()
    (root / "docs" / "page.md").write_text(PAGE)
    return root


def test_an_example_matches_its_cpu_twin_with_no_compile_after_step_2(checkout):
    ok, line = referee.check_example(checkout, referee.Example("examples/train_tiny.py"), timeout=300)
    assert ok, line
    assert line.startswith("ran unchanged; losses at steps 0, 5, 10: ")
    ours, theirs = line.split("losses at steps 0, 5, 10: ")[1].split(" (torch CPU: ")
    assert ours.split() == theirs.split(";")[0].split()                 # 6 significant digits
    assert float(ours.split()[-1]) < float(ours.split()[0])             # it trains
    assert line.endswith("at step 2, 0 after step 2)")
    assert "0 compiles" not in line                                       # the xlanb run compiled; its twin ran on CPU


def test_a_page_s_blocks_match_their_cpu_twin(checkout):
    ok, line = referee.check_doc(checkout, "docs/page.md", timeout=300)
    assert ok, line
    assert line.startswith("ran unchanged (2 blocks); 8 tensors (the top-level tensors after each block, the "
                           "modules' state at the end) against torch CPU: largest difference ")
    assert "compiles block 1: 1, block 2: 1" in line


def test_a_missing_module_is_named_instead_of_run(checkout):
    ok, line = referee.check_example(checkout, referee.Example("examples/train_tiny.py", needs=("no_such_module_x",)))
    assert not ok and line.startswith("not run: needs no_such_module_x (not importable by ")


def test_a_0_dim_xla_tensor_formats_as_its_number_as_on_cpu():
    import xlanb
    cpu = torch.tensor(2.25, requires_grad=True) * 2
    xla = torch.tensor(2.25, requires_grad=True).to(xlanb.device()) * 2
    assert f"{xla}" == f"{cpu}" == "4.5"
    assert f"{xla:.3f}" == f"{cpu:.3f}" == "4.500" and "{:>6}".format(xla) == "   4.5"
    assert str(xla) == "tensor(4.5000, device='xla:0', grad_fn=<MulBackward0>)"     # str and repr stay tensors
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{torch.ones(2).to(xlanb.device()):.3f}"                          # as torch raises for a CPU vector


def test_many_programs_with_collectives_in_flight_on_8_cpu_devices_finish():
    # 80 launches, each x.T @ x over 8 batch shards (an all-reduce); without one such program in
    # flight at a time, XLA's CPU runtime deadlocks at the all-reduce and aborts the process after 40 s
    r = result_of(run_python("-m", "xlanb.compat", str(PROGRAMS / "mesh_collectives.py"), "lazy", "10", "4096",
                             devices=8, timeout=200))
    # the same program on torch CPU (`mesh_collectives.py cpu 10 4096`) gives w 402.68976, x 8935432.0
    assert r["w"] == pytest.approx(402.68976, rel=1e-5) and r["x"] == pytest.approx(8935432.0, rel=1e-5)
