"""torch_xla's own material as a referee for the compat layer.

    python tools/torch_xla_referee.py PYTORCH_XLA_CHECKOUT [test/file.py ...]
    python tools/torch_xla_referee.py --examples PYTORCH_XLA_CHECKOUT [examples/file.py ...]
    python tools/torch_xla_referee.py --docs PYTORCH_XLA_CHECKOUT [docs/source/page.md ...]

Test files: each runs under pytest in a fresh process with the compat layer installed first, from
the checkout's `test/` directory (the SPMD files on 8 CPU devices), and one line per file says how
many tests passed, failed, errored and were skipped. Nothing of torch_xla is imported: the test
files only import `torch_xla`, which the compat layer serves.

Examples (`--examples`): each training script runs unchanged twice, in fresh processes: on xlanb
(`python -m xlanb.compat` does the same) and as its CPU twin (the compat layer installed, but
`torch_xla.device()` and `xm.xla_device()` give torch's `cpu` device and `MpDeviceLoader` hands
out CPU batches, so the script's ops run in torch on the CPU). One line per script gives the
losses it printed on both, the largest relative difference, and the compiles (xlanb's Compile
events, torch_xla's UncachedCompile) by training step: a compile is counted at the step whose
batch the loader last handed out, so "0 after step 2" means steps 3 onwards ran cached graphs.
Small sizes, stated here because the scripts under `examples/eager/` take no flags:
  * before the script runs, the runner imports the checkout's `examples/train_decoder_only_base.py`
    and replaces the defaults of `TrainDecoderOnlyBase.__init__` (`num_steps=200`,
    `config=DecoderOnlyConfig()`) by `num_steps=STEPS` and `DecoderOnlyConfig(**DECODER)`
    (batch 16 and sequence 512 are fixed in `__init__` and stay); `train_decoder_only_base.py`
    itself gets the same sizes from its own flags;
  * `examples/data_parallel/train_resnet_spmd_data_parallel.py`: after `TrainResNetBase.__init__`
    (224x224 images, batch 128, 300 steps, ResNet-50) the runner sets `img_dim`, `batch_size` and
    `num_steps` from RESNET before the SPMD subclass builds its loader from them;
  * `torch.manual_seed(0)` before each script (the eager scripts seed nothing; both twins start
    from the same weights).
Each script's file is used as it is in the checkout; its `xmp.spawn` replicas get the same setup
(`xlanb.compat.spawn.worker_setup`). Scripts that import torchvision need it importable.

Pages (`--docs`): the page's ```python blocks run in order in one namespace, on xlanb and as the
CPU twin; every top-level tensor after each block, and the modules' state at the end, is compared,
and the compiles of each block are counted.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import importlib.util
import json
import os
import pathlib
import re
import runpy
import subprocess
import sys

FILES = ("test/test_async_closures.py", "test/test_metrics.py", "test/test_devices.py",
         "test/test_dynamic_shapes_detector.py", "test/eager/test_eager.py", "test/eager/test_eager_spmd.py",
         "test/eager/test_eager_with_xla_compile.py", "test/eager/test_eager_with_torch_compile.py",
         "test/dynamo/test_dynamo.py", "test/spmd/test_xla_sharding.py")
RUN = ("import sys, xlanb.compat; xlanb.compat.install(); import pytest; "
       "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))")
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def run_file(checkout: pathlib.Path, name: str, timeout: int = 1800) -> dict:
    """{'passed', 'failed', 'error', 'skipped'} counts for one test file (and 'note' when it did not run)."""
    path = checkout / name
    test_dir = checkout / "test"
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLANB_")}
    env["PYTHONPATH"] = os.pathsep.join([str(test_dir), str(test_dir / "spmd"), str(path.parent)] +
                                        [p for p in sys.path if p])
    if "/spmd/" in name or "spmd" in path.name:
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    try:
        proc = subprocess.run([sys.executable, "-c", RUN, str(path)], cwd=str(test_dir), env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "note": f"timed out after {timeout} s"}
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    lines = proc.stdout.strip().splitlines()
    for number, word in SUMMARY.findall(lines[-1] if lines else ""):
        counts["error" if word.startswith("error") else word] = int(number)
    if not any(counts.values()):
        counts["note"] = (lines[-1] if lines else proc.stderr.strip().splitlines()[-1:] or ["no output"])[-1][:200]
    return counts



# ---- examples: the training scripts, on xlanb and on torch CPU ----

STEPS = 30                     # losses printed at steps 0, 10 and 20 (a closure added at the last step never runs)
DECODER = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 128}
RESNET = {"img_dim": 32, "batch_size": 2, "num_steps": STEPS}     # batch per device (the SPMD example scales it)
DECODER_FLAGS = ("--num-steps", str(STEPS), "--hidden-size", "64", "--num-layers", "1", "--num-attention-heads", "4",
                 "--num-key-value-heads", "2", "--intermediate-size", "128")
MNIST_FLAGS = ("--fake_data", "--num_epochs", "1", "--log_steps", "20")


@dataclasses.dataclass(frozen=True)
class Example:
    path: str
    argv: tuple = ()
    shrink: str = ""             # "decoder" | "resnet": the sizes the runner sets (module docstring)
    devices: int = 1             # CPU devices of the process (XLA_FLAGS)
    replicas: int = 0            # CPU_NUM_DEVICES: the processes torch_xla.launch starts (0: not set)
    needs: tuple = ()            # modules the script imports besides torch and torch_xla
    twin: str = "cpu"            # why there is no CPU twin, when there is none


EXAMPLES = (
    Example("examples/train_decoder_only_base.py", DECODER_FLAGS),
    Example("examples/eager/train_decoder_only_eager.py", shrink="decoder"),
    Example("examples/eager/train_decoder_only_eager_with_compile.py", shrink="decoder"),
    Example("examples/eager/train_decoder_only_eager_multi_process.py", shrink="decoder", replicas=2),
    Example("examples/eager/train_decoder_only_eager_spmd_data_parallel.py", shrink="decoder", devices=8),
    Example("examples/data_parallel/train_resnet_spmd_data_parallel.py", shrink="resnet", devices=8,
            needs=("torchvision",)),
    Example("test/test_train_mp_mnist.py", MNIST_FLAGS, needs=("torchvision",)),
    Example("test/test_train_mp_mnist.py", MNIST_FLAGS + ("--num_cores", "2"), replicas=2, needs=("torchvision",),
            twin="no CPU twin: the script scales the learning rate and the steps by the replica count"),
)
LOSS_LINES = (re.compile(r"step: (\d+), loss: (?:tensor\()?(-?[0-9.]+(?:e[-+]?\d+)?)"),      # the examples' _train_update
              re.compile(r"Step=(\d+) Loss=(-?[0-9.]+)"))                             # test_utils' progress line


class _CpuLoader:
    """The CPU twin's `pl.MpDeviceLoader`: the host batches on the CPU, with the same syncs (which
    run the step closures) before each batch and at the end."""

    def __init__(self, loader, device, **kwargs):
        self._loader, self._device = loader, device

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self):
        import torch
        from torch.utils import _pytree as pytree

        from xlanb.compat import steps
        for batch in self._loader:
            steps.sync()
            yield pytree.tree_map(lambda v: v.to(self._device) if isinstance(v, torch.Tensor) else v, batch)
        steps.sync()


def _use_cpu_device() -> None:
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.parallel_loader as pl
    cpu = torch.device("cpu")
    torch_xla.device = lambda index=None: cpu
    xm.xla_device = lambda n=None, devkind=None: cpu
    pl.MpDeviceLoader = _CpuLoader


def _shrink(checkout: pathlib.Path, shrink: str) -> None:
    """The small sizes of the module docstring, set on the checkout's example base classes."""
    sys.path.append(str(checkout / "examples"))
    if shrink == "decoder":
        import train_decoder_only_base as base
        from decoder_only_model import DecoderOnlyConfig
        init = base.TrainDecoderOnlyBase.__init__
        names = init.__code__.co_varnames[1:init.__code__.co_argcount]
        defaults = dict(zip(names[-len(init.__defaults__):], init.__defaults__))
        if set(defaults) != {"decoder_cls", "num_steps", "config"}:
            raise RuntimeError(f"TrainDecoderOnlyBase.__init__ takes {names}; the referee knows "
                               "(decoder_cls, num_steps, config)")
        defaults.update(num_steps=STEPS, config=DecoderOnlyConfig(**DECODER))
        init.__defaults__ = tuple(defaults.values())
    elif shrink == "resnet":
        import train_resnet_base as base
        init = base.TrainResNetBase.__init__

        @functools.wraps(init)
        def small_init(self, *args, **kwargs):
            init(self, *args, **kwargs)
            for name, value in RESNET.items():
                setattr(self, name, value)
        base.TrainResNetBase.__init__ = small_init


class _CompileSteps:
    """Each Compile event's (loader pass, batch index) at the time it happened (-1: before any batch)."""

    def __init__(self):
        self.passes, self.batch, self.compiles = 0, -1, []

    def __call__(self, event) -> None:
        from xlanb import events
        if isinstance(event, events.LoaderWait):
            if event.index == 0:
                self.passes += 1
            self.batch = event.index
        elif isinstance(event, events.Compile):
            self.compiles.append((self.passes, self.batch))

    def report(self) -> None:
        from xlanb.compat import devices
        print("REFEREE " + json.dumps({"ordinal": devices.global_ordinal(), "world_size": devices.world_size(),
                                       "compiles": self.compiles}), flush=True)


def _prepare(checkout: str, shrink: str, cpu: bool) -> "_CompileSteps":
    """The runner's setup of one process (the script's, or one of its xmp.spawn replicas)."""
    import torch

    from xlanb.state import runtime_state
    torch.manual_seed(0)
    if cpu:
        _use_cpu_device()
    if shrink:
        _shrink(pathlib.Path(checkout), shrink)
    steps = _CompileSteps()
    runtime_state().subscribe(steps)
    atexit.register(steps.report)
    return steps


def run_example(checkout: str, script: str, shrink: str, cpu: bool, args: list[str]) -> None:
    """One run of `script` (the --run mode the example runner starts in a fresh process)."""
    import torch_xla_referee as referee          # by its module name: replicas unpickle the setup by name
    import xlanb.compat
    from xlanb.compat import spawn
    xlanb.compat.install()
    referee._prepare(checkout, shrink, cpu)
    spawn.worker_setup.append((referee._prepare, (checkout, shrink, cpu)))
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


def _child_env(devices: int, replicas: int = 0) -> dict:
    """A runner child's environment: xlanb's defaults, `devices` CPU devices, `replicas` for torch_xla.launch."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLANB_") and k not in ("XLA_FLAGS", "CPU_NUM_DEVICES")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    if replicas:
        env["CPU_NUM_DEVICES"] = str(replicas)
    return env


def _run(checkout: pathlib.Path, ex: Example, cpu: bool, timeout: int) -> dict:
    env = _child_env(ex.devices, 0 if cpu else ex.replicas)
    command = [sys.executable, os.path.abspath(__file__), "--run", str(checkout), str(checkout / ex.path),
               ex.shrink or "-", "cpu" if cpu else "xla", *ex.argv]
    try:
        proc = subprocess.run(command, cwd=str((checkout / ex.path).parent), env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    losses: dict[int, list[float]] = {}
    for line in proc.stdout.splitlines():
        for pattern in LOSS_LINES:
            m = pattern.search(line)
            if m:
                losses.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    reports = [json.loads(line[len("REFEREE "):]) for line in proc.stdout.splitlines() if line.startswith("REFEREE ")]
    if any(r["world_size"] > 1 for r in reports):       # the replicas' reports, not the launching process's
        reports = sorted((r for r in reports if r["world_size"] > 1), key=lambda r: r["ordinal"])
    result = {"losses": losses, "reports": reports}
    if proc.returncode != 0:
        result["error"] = f"exit {proc.returncode}: " + " | ".join((proc.stderr.strip().splitlines() or ["?"])[-3:])[-600:]
    return result


def _compiles_text(reports: list[dict]) -> str:
    parts = []
    for r in reports:
        by_step = [0, 0, 0, 0]      # before the first batch, step 1, step 2, after step 2
        for _, batch in r["compiles"]:
            by_step[min(batch + 1, 3)] += 1
        who = f"replica {r['ordinal']}: " if len(reports) > 1 else ""
        parts.append(f"{who}{sum(by_step)} compiles ({by_step[0]} before the first batch, {by_step[1]} at step 1, "
                     f"{by_step[2]} at step 2, {by_step[3]} after step 2)")
    passes = max((p for r in reports for p, _ in r["compiles"]), default=0)
    steps = f"; steps counted in each of the {passes} passes over a loader" if passes > 1 else ""
    return ("; ".join(parts) or "no compile report") + steps


def check_example(checkout: pathlib.Path, ex: Example, rtol: float = 1e-4, timeout: int = 3600) -> tuple[bool, str]:
    """(passed, one line): the script on xlanb against its CPU twin (module docstring)."""
    missing = [m for m in ex.needs if importlib.util.find_spec(m) is None]
    if missing:
        return False, f"not run: needs {', '.join(missing)} (not importable by {sys.executable})"
    xla = _run(checkout, ex, cpu=False, timeout=timeout)
    if "error" in xla:
        return False, f"FAILED on xlanb: {xla['error']}"
    steps = sorted(xla["losses"])
    if not steps:
        return False, "FAILED: no loss lines in its output"
    split = [s for s in steps if len(set(xla["losses"][s])) > 1]
    if split:
        return False, f"FAILED: the replicas print different losses at step {split[0]}: {xla['losses'][split[0]]}"
    ours = [xla["losses"][s][0] for s in steps]
    text = f"losses at steps {', '.join(map(str, steps))}: {' '.join(f'{v:.6g}' for v in ours)}"
    ok = True
    if ex.twin == "cpu":
        cpu = _run(checkout, ex, cpu=True, timeout=timeout)
        if "error" in cpu:
            return False, f"{text}; FAILED on the CPU twin: {cpu['error']}"
        theirs = [cpu["losses"].get(s, [float("nan")])[0] for s in steps]
        worst = max(abs(a - b) / max(abs(b), 1e-12) if b == b else float("inf") for a, b in zip(ours, theirs))
        ok = worst <= rtol
        text += (f" (torch CPU: {' '.join(f'{v:.6g}' for v in theirs)}; largest relative difference {worst:.1e}"
                 f"{'' if ok else f', over {rtol:g}: MISMATCH'})")
    else:
        ok = ours[-1] < ours[0]
        text += f" ({ex.twin}; the loss {'falls' if ok else 'does not fall: FAILED'})"
    after = sum(1 for r in xla["reports"] for _, batch in r["compiles"] if batch >= 2)
    ok = ok and after == 0 and bool(xla["reports"])
    return ok, f"ran unchanged; {text}; {_compiles_text(xla['reports'])}"


def main_examples(argv: list[str]) -> int:
    checkout = pathlib.Path(argv[0]).resolve() if argv else None
    if checkout is None or not (checkout / "examples").is_dir():
        print(f"torch_xla_referee --examples: {checkout} has no examples/ directory; give a pytorch/xla checkout",
              file=sys.stderr)
        return 2
    chosen = [ex for ex in EXAMPLES if not argv[1:] or ex.path in argv[1:]]
    failed = 0
    for ex in chosen:
        if not (checkout / ex.path).is_file():
            print(f"{ex.path}: missing in the checkout", flush=True)
            continue
        ok, line = check_example(checkout, ex)
        failed += not ok
        flags = " " + " ".join(ex.argv) if ex.argv else ""
        env = "".join([f" [{ex.devices} CPU devices]" if ex.devices > 1 else "",
                       f" [CPU_NUM_DEVICES={ex.replicas}]" if ex.replicas else ""])
        print(f"{ex.path}{flags}{env}: {line}", flush=True)
    return 1 if failed else 0


# ---- docs: the code blocks of a page, run in order in one namespace, on xlanb and on torch CPU ----

DOCS = ("docs/source/learn/eager.md",)
DOC_NEEDS = {"docs/source/learn/eager.md": ("torchvision",)}
CODE_BLOCK = re.compile(r"^```[ ]?python[ ]*\n(.*?)^```", re.S | re.M)


def _doc_state(namespace: dict, prefix: str, modules: bool) -> dict:
    """The page's results as CPU tensors: its top-level tensors (and its modules' state)."""
    import torch
    state = {}
    for name, value in namespace.items():
        if isinstance(value, torch.Tensor):
            state[f"{prefix}{name}"] = value.detach().cpu()
        elif modules and isinstance(value, torch.nn.Module):
            state.update({f"{prefix}{name}.{k}": v.detach().cpu() for k, v in value.state_dict().items()})
    return state


def run_doc(checkout: str, page: str, cpu: bool, out: str) -> None:
    """Runs the page's ```python blocks (the --run-doc mode main_docs starts in a fresh process)."""
    import torch

    import xlanb.compat
    xlanb.compat.install()
    steps = _prepare(checkout, "", cpu)
    namespace = {"__name__": "__main__"}
    state = {}
    text = pathlib.Path(page).read_text()
    for number, code in enumerate(CODE_BLOCK.findall(text), 1):
        before = len(steps.compiles)
        exec(compile(code, f"{page} (block {number})", "exec"), namespace)
        print("REFEREE-BLOCK " + json.dumps({"block": number, "lines": code.count("\n"),
                                             "compiles": len(steps.compiles) - before}), flush=True)
        state.update(_doc_state(namespace, f"block {number}: ", modules=False))
    state.update(_doc_state(namespace, "end: ", modules=True))
    torch.save(state, out)


def check_doc(checkout: pathlib.Path, page: str, rtol: float = 1e-4, timeout: int = 3600) -> tuple[bool, str]:
    """(passed, one line): the page's blocks on xlanb against the same blocks on torch CPU."""
    import tempfile

    import torch
    missing = [m for m in DOC_NEEDS.get(page, ()) if importlib.util.find_spec(m) is None]
    if missing:
        return False, f"not run: needs {', '.join(missing)} (not importable by {sys.executable})"
    runs = {}
    with tempfile.TemporaryDirectory(prefix="xlanb_referee_") as tmp:
        for where in ("xla", "cpu"):
            out = os.path.join(tmp, f"{where}.pt")
            command = [sys.executable, os.path.abspath(__file__), "--run-doc", str(checkout), str(checkout / page),
                       where, out]
            try:
                proc = subprocess.run(command, cwd=tmp, env=_child_env(1), capture_output=True, text=True,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                return False, f"FAILED: timed out after {timeout} s ({where})"
            if proc.returncode != 0:
                tail = " | ".join((proc.stderr.strip().splitlines() or ["?"])[-3:])[-600:]
                return False, f"FAILED on {'xlanb' if where == 'xla' else 'the CPU twin'}: exit {proc.returncode}: {tail}"
            blocks = [json.loads(line[len("REFEREE-BLOCK "):]) for line in proc.stdout.splitlines()
                      if line.startswith("REFEREE-BLOCK ")]
            runs[where] = (blocks, torch.load(out))
    blocks, ours = runs["xla"]
    theirs = runs["cpu"][1]
    worst, worst_name = 0.0, ""
    for name, value in ours.items():
        other = theirs.get(name)
        if other is None or other.shape != value.shape or other.dtype != value.dtype:
            return False, f"FAILED: {name} differs in kind from the CPU twin's"
        if value.is_floating_point() and value.numel():
            diff = (value.double() - other.double()).abs().max().item() / max(other.double().abs().max().item(), 1e-12)
        else:
            diff = 0.0 if torch.equal(value, other) else float("inf")
        if diff > worst:
            worst, worst_name = diff, name
    ok = worst <= rtol and set(ours) == set(theirs)
    per_block = ", ".join(f"block {b['block']}: {b['compiles']}" for b in blocks)
    return ok, (f"ran unchanged ({len(blocks)} blocks); {len(ours)} tensors (the top-level tensors after each "
                f"block, the modules' state at the end) against torch CPU: largest difference {worst:.1e} of the largest magnitude"
                f"{f' ({worst_name})' if worst_name else ''}{'' if ok else f', over {rtol:g}: MISMATCH'}; "
                f"compiles {per_block}")


def main_docs(argv: list[str]) -> int:
    checkout = pathlib.Path(argv[0]).resolve() if argv else None
    if checkout is None or not (checkout / "docs").is_dir():
        print(f"torch_xla_referee --docs: {checkout} has no docs/ directory; give a pytorch/xla checkout",
              file=sys.stderr)
        return 2
    failed = 0
    for page in [p for p in DOCS if not argv[1:] or p in argv[1:]]:
        ok, line = check_doc(checkout, page)
        failed += not ok
        print(f"{page}: {line}", flush=True)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if argv[0] == "--examples":
        return main_examples(argv[1:])
    if argv[0] == "--docs":
        return main_docs(argv[1:])
    if argv[0] == "--run-doc":      # one run of a page's blocks, started by main_docs
        checkout, page, where, out = argv[1:5]
        run_doc(checkout, page, where == "cpu", out)
        return 0
    if argv[0] == "--run":          # one run of an example, started by main_examples
        checkout, script, shrink, where, *args = argv[1:]
        run_example(checkout, script, "" if shrink == "-" else shrink, where == "cpu", args)
        return 0
    checkout = pathlib.Path(argv[0]).resolve()
    if not (checkout / "test").is_dir():
        print(f"torch_xla_referee: {checkout} has no test/ directory; give a pytorch/xla checkout", file=sys.stderr)
        return 2
    total = {"passed": 0, "run": 0}
    for name in argv[1:] or FILES:
        if not (checkout / name).is_file():
            print(f"{name}: missing in the checkout")
            continue
        c = run_file(checkout, name)
        ran = c["passed"] + c["failed"] + c["error"]
        total["passed"] += c["passed"]
        total["run"] += ran
        print(f"{name}: {c['passed']} of {ran} pass ({c['failed']} failed, {c['error']} errors, {c['skipped']} skipped)"
              + (f"; {c['note']}" if "note" in c else ""), flush=True)
    if total["run"]:
        print(f"all: {total['passed']} of {total['run']} pass ({100 * total['passed'] / total['run']:.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
