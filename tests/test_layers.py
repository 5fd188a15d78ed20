"""The package imports in one direction only (STYLE.md, docs/architecture.md): a module imports
only from layers before it, at module level or inside a function. notebook may import every
layer but the package root; nothing imports notebook; nothing inside imports `xlanb` itself."""

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "xlanb"
LAYERS = ["_requirements", "_config", "config", "events", "state", "ir", "lower", "runtime", "capture", "replay", "hooks", "metrics", "debug",
          "dynamo", "report", "spmd", "loader", "generation", "compat", "selfcheck", "notebook"]


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "xlanb" or len(parts) == 1:
        return None
    return parts[1] if parts[1] in LAYERS else None


def imports(path: pathlib.Path):
    """Every module an import statement names, anywhere in the file (functions included);
    `from xlanb import metrics` names xlanb.metrics, `from xlanb import x` of a non-module names xlanb."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "xlanb":
                for alias in node.names:
                    yield f"xlanb.{alias.name}" if alias.name in LAYERS else "xlanb"
            else:
                yield node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name


def own_layer(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


def test_every_module_belongs_to_a_layer():
    layers = {own_layer(p) for p in ROOT.rglob("*.py")} - {"__init__", "labextension"}
    assert layers <= set(LAYERS), f"modules outside the layer list: {sorted(layers - set(LAYERS))}"


def test_imports_flow_one_way():
    problems = []
    for path in ROOT.rglob("*.py"):
        own = own_layer(path)
        if own == "__init__":
            continue
        for module in imports(path):
            target = layer_of(module)
            if target is None or target == own:
                continue
            if LAYERS.index(target) > LAYERS.index(own):
                problems.append(f"{path.relative_to(ROOT)} imports {module}")
    assert problems == []


def test_nothing_inside_imports_the_package_root():
    """`import xlanb` from inside the package hides an upward import from the test above."""
    problems = [f"{path.relative_to(ROOT)} imports {module}"
                for path in ROOT.rglob("*.py") if own_layer(path) != "__init__"
                for module in imports(path) if module == "xlanb"]
    assert problems == []


def test_the_layer_check_sees_hidden_imports(tmp_path):
    """Imports inside functions, and `from xlanb import <layer>`, are seen."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from xlanb import metrics\n    import xlanb\n    from xlanb.report import x\n")
    assert list(imports(source)) == ["xlanb.metrics", "xlanb", "xlanb.report"]


def test_runtime_never_imports_ipython():
    for path in ROOT.rglob("*.py"):
        if path.relative_to(ROOT).parts[0] == "notebook":
            continue
        for module in imports(path):
            assert not module.startswith(("IPython", "ipywidgets", "anywidget")), f"{path} imports {module}"


def test_the_lazy_tensor_is_the_ground_floor_of_capture():
    """capture/tensor.py (LazyTensor, Storage, views' values) imports no other capture module but
    capture/nodes.py (how capture makes IR nodes), which imports none: those above it that it must
    call (growth's cat folding) register themselves with it."""
    named = [m for m in imports(ROOT / "capture" / "tensor.py") if m.startswith("xlanb.capture")]
    assert named == ["xlanb.capture.nodes"]
    assert [m for m in imports(ROOT / "capture" / "nodes.py") if m.startswith("xlanb.capture")] == []


def test_the_ir_reads_no_configuration_and_no_runtime():
    """A node and a graph are built from their arguments: the IR imports neither the configuration
    nor the Runtime (the settings a graph is built under are passed in: runtime/executor.new_graph)."""
    problems = [f"{path.relative_to(ROOT)} imports {module}" for path in (ROOT / "ir").rglob("*.py")
                for module in imports(path) if module in ("xlanb._config", "xlanb.config", "xlanb.state")]
    assert problems == []


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: pathlib.Path, known: set[str]):
    """The package's modules a file imports, anywhere in it: `from xlanb.compat import devices`
    names xlanb.compat.devices when that is a module, else xlanb.compat."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if full in known else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def import_circles() -> list[list[str]]:
    """Groups of modules that reach each other through imports (function-level ones included)."""
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    known = set(paths)
    edges = {m: {t for t in module_imports(p, known) if t in known and t != m} for m, p in paths.items()}
    reach = {}
    for start in edges:
        seen, todo = set(), list(edges[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(edges[m])
        reach[start] = seen
    circles = {frozenset(m for m in reach[s] if s in reach[m]) | {s} for s in edges if s in reach[s]}
    return sorted(sorted(c) for c in circles)


def test_no_module_imports_itself_through_others():
    """Within a layer, too: a circle of imports (capture/modes -> replay -> modes; compat's mesh ->
    the torch_xla face -> mesh) means no file of it can be read or tested without the others."""
    assert import_circles() == []


def test_the_circle_check_sees_a_circle_through_a_function_level_import(tmp_path, monkeypatch):
    package = tmp_path / "xlanb"
    (package / "a").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a" / "__init__.py").write_text("")
    (package / "a" / "one.py").write_text("from xlanb.a import two\n")
    (package / "a" / "two.py").write_text("def f():\n    from xlanb.a.one import g\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", package)
    assert import_circles() == [["xlanb.a.one", "xlanb.a.two"]]


# Module-level mutables that are not runtime state, each with its reason. Runtime state (what a
# sync, a cell or `reset()` reads and changes) lives on the Runtime (xlanb/state.py); anything else
# module-level and mutable fails the test below.
NOT_RUNTIME_STATE = {
    "_config.py": {"_fixed": "fields frozen for the process (device_name), by design past reset()",
                   "_watchers": "callbacks registered once at install, as listeners are"},
    "capture/checks.py": {"_index_shapes": "a pure memo of torch's indexing shapes"},
    "capture/device.py": {"_registered": "torch's PrivateUse1 backend is renamed once per process"},
    "capture/factories.py": {"_library": "the torch.library registration handle, alive for the process",
                             "_verdicts": "CPU's verdict per factory call: a pure memo of torch's answer"},
    "capture/frames.py": {"_library_files": "a pure memo: which files are library code",
                          "_frames": "interned Frame objects, one per source line"},
    "capture/nans.py": {"_recording": "the scopes debug_nans opens, following the setting (not reset)"},
    "capture/scopes.py": {"_child_names": "a memo of module attribute names, checked at each use",
                          "_calls": "Module.__call__ as it was when the wrapper went in (torch's, or another library's wrapper)",
                          "_wrapper": "the wrapper it puts in (a constant, swapped once for dynamo)",
                          "_left_under": "whether the wrapper sits under another library's, as Module.__call__ is: process-wide"},
    "capture/tensor.py": {"_next_address": "fake storage addresses: identity, never reused while the process lives",
                          "_by_address": "address -> live storage, weak: identity"},
    "capture/torch_versions.py": {"_kept": "ctypes objects C++ holds pointers to: must outlive every caller"},
    "capture/verdict.py": {"_checked": "CPU's verdict per signature: a pure memo of torch's answer"},
    "capture/overlap.py": {"_verdicts": "CPU's overlap verdict per layout: a pure memo of torch's answer"},
    "compat/collectives.py": {"_rendezvous_count": "process-wide rendezvous ids, never repeated"},
    "compat/counters.py": {"_op_names": "OpOverload -> its torch_xla counter name: a pure memo",
                           "_alive": "the weakrefs whose callbacks count the tensors freed: each lives as its tensor"},
    "compat/sharding.py": {"_warned_use_spmd": "a one-time warning, as Python's warning registry"},
    "compat/spawn.py": {"worker_setup": "the runner's per-process setup handed to spawned replicas"},
    "compat/tensors.py": {"_next_id": "process-wide tensor ids, never repeated",
                          "_storage_ids": "storage -> its id, weak: identity"},
    "compat/steps.py": {"_async_runner": "the background thread (a resource)",
                        "_compiled_functions": "a function's compiled wrapper, weak on the function"},
    "dynamo/__init__.py": {"_backend": "the backend function, made once"},
    "dynamo/_torch_hooks.py": {"_installed": "torch's hooks are patched once per process"},
    "dynamo/backend.py": {"_ids": "process-wide graph ids, never repeated"},
    "dynamo/breaks.py": {"_seen": "how far dynamo's own guard-failure lists were read (dynamo's state)",
                         "_installed": "listeners are installed once per process"},
    "events.py": {"_seq": "process-wide event ids, never repeated"},
    "ir/node.py": {"_metas": "interned Meta objects"},
    "lower/registry.py": {"_loaded": "the rule modules are imported once"},
    "notebook/__init__.py": {"_loaded": "the IPython extension is loaded once per kernel"},
    "notebook/widget.py": {"_widget_class": "the widget class, made once"},
    "report/sharding.py": {"_picture_schema": "a constant piece of the JSON schema"},
    "runtime/outside.py": {"_disable": "torch._dynamo.disable, looked up once the backend is registered"},
    "runtime/stages.py": {"_unsupported": "compile options this process's jaxlib refuses: a fact of the installed XLA"},
}
SCHEMA_FILES = {"report/schema.py"}          # the JSON schema: every module-level value is a constant piece of it
_MUTABLE_CALLS = {"dict", "list", "set", "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "OrderedDict",
                  "defaultdict", "deque", "count", "Counter"}


def module_mutables(path: pathlib.Path):
    """Names a module binds at its top level to a mutable container or a counter (constants, in
    capitals, are left out)."""
    for stmt in ast.parse(path.read_text()).body:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            continue
        v = stmt.value
        call = getattr(v.func, "id", None) or getattr(v.func, "attr", None) if isinstance(v, ast.Call) else None
        if not (isinstance(v, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp))
                or call in _MUTABLE_CALLS):
            continue
        for t in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
            if isinstance(t, ast.Name) and not t.id.lstrip("_").isupper() and not t.id.startswith("__"):
                yield t.id


def test_runtime_state_lives_on_the_runtime():
    found = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel in SCHEMA_FILES:
            continue
        names = set(module_mutables(path))
        if names:
            found[rel] = names
    unexplained = {f"{rel}: {n}" for rel, names in found.items() for n in names - set(NOT_RUNTIME_STATE.get(rel, ()))}
    stale = {f"{rel}: {n}" for rel, reasons in NOT_RUNTIME_STATE.items() for n in reasons if n not in found.get(rel, ())}
    assert unexplained == set(), "module-level state: put it on the Runtime (xlanb/state.py) or say why it is not"
    assert stale == set(), "listed as not runtime state, but no longer there"


def test_the_state_check_sees_a_module_level_list_and_dict(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import itertools\nA = []\n_seen = {}\n_ids = itertools.count()\nx: list = []\n"
                      "def f():\n    local = []\n")
    assert sorted(module_mutables(source)) == ["_ids", "_seen", "x"]


def test_the_torch_xla_face_only_names():
    """xlanb/compat/torch_xla_tree/ (the `torch_xla` modules compat installs) imports and names: no
    function, class or statement that does work; the logic lives in xlanb/compat/ proper, which never
    imports the face."""
    face = ROOT / "compat" / "torch_xla_tree"
    problems = []
    for path in face.rglob("*.py"):
        for stmt in ast.parse(path.read_text()).body:
            naming = isinstance(stmt, (ast.Import, ast.ImportFrom)) or (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)) or (
                isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets)
                and all(isinstance(v, (ast.Constant, ast.Name, ast.Attribute, ast.List, ast.Tuple))
                        for v in ast.walk(stmt.value) if not isinstance(v, ast.Load)))
            if not naming:
                problems.append(f"{path.relative_to(ROOT)}:{stmt.lineno} {type(stmt).__name__}")
    assert problems == []
    for path in ROOT.rglob("*.py"):
        if face not in path.parents:
            assert not [m for m in imports(path) if m.startswith("xlanb.compat.torch_xla_tree")], path


def test_replay_writes_no_tensor_slot():
    """Replay rebinds tensors through capture/tensor.py's functions (rebind_holder, forget_view), never
    by writing a LazyTensor's or a Storage's slots itself."""
    slots = {"_node", "_storage", "_views", "_view_node", "_view_version", "node", "version"}
    problems = []
    for path in (ROOT / "replay").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute) and sub.attr in slots:
                        problems.append(f"{path.relative_to(ROOT)}:{node.lineno} writes .{sub.attr}")
    assert problems == []
