"""The package imports in one direction only (STYLE.md): a module imports only from layers
before it. notebook may import everything; nothing imports notebook."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "xlanb"
LAYERS = ["_config", "events", "ir", "lower", "runtime", "capture", "metrics", "debug", "report", "notebook"]


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "xlanb" or len(parts) == 1:
        return None
    return parts[1] if parts[1] in LAYERS else None


def imports(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name


def test_imports_flow_one_way():
    problems = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        own = rel.parts[0].removesuffix(".py")
        if own == "__init__":
            continue
        for module in imports(path):
            target = layer_of(module)
            if target is None or target == own:
                continue
            if LAYERS.index(target) > LAYERS.index(own):
                problems.append(f"{rel} imports {module}")
    assert problems == []


def test_runtime_never_imports_ipython():
    for path in ROOT.rglob("*.py"):
        if path.relative_to(ROOT).parts[0] == "notebook":
            continue
        for module in imports(path):
            assert not module.startswith(("IPython", "ipywidgets", "anywidget")), f"{path} imports {module}"
