"""The package's shape: one direction of dependencies (no import circle in py/trellis, counting
imports inside functions too) and no module importing another's private names."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "py" / "trellis"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str):
    """(imported module, imported names) of every import in module `name`."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            yield base, tuple(a.name for a in node.names)


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name in MODULES:
        deps = set()
        for base, names in _imports(name):
            deps |= {m for m in [base, *(f"{base}.{n}" for n in names)] if m in MODULES}
        # a module's own packages (their __init__ runs first anyway) are not a dependency edge
        graph[name] = {d for d in deps if d != name and not name.startswith(d + ".")}
    return graph


def test_no_import_circles():
    graph, index, low, stack, on_stack, circles = _graph(), {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert not circles


def test_no_module_imports_private_names():
    """No `from x import _name` (a private module, `from . import _dfa`, is a package's own)."""
    found = [f"{name} imports {base}.{n}" for name in MODULES for base, names in _imports(name)
             for n in names if n.startswith("_") and not n.startswith("__") and f"{base}.{n}" not in MODULES]
    assert not found
