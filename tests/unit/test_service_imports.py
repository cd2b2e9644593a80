"""`service/` imports: every module imports on its own, only at module level, and no two import each other
round a circle (type-only imports count: a circle that only type checking sees is still one to a reader)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import hourglass.service
import pytest

SERVICE = Path(hourglass.service.__file__).parent
PACKAGE = "hourglass.service"


def _name(path: Path) -> str:
    parts = path.relative_to(SERVICE).with_suffix("").parts
    return ".".join((PACKAGE, *parts[:-1])) if parts[-1] == "__init__" else ".".join((PACKAGE, *parts))


MODULES = {_name(path): ast.parse(path.read_text(), str(path)) for path in sorted(SERVICE.rglob("*.py"))}


def _imported(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The hourglass modules an import statement names (`from a import b` names `a.b` when that is a module)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name.startswith("hourglass"))
    elif node.module is not None and node.module.startswith("hourglass"):
        yield node.module
        yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _edges(tree: ast.Module) -> set[str]:
    """The service modules a module imports, at any depth of its text."""
    found = {
        name for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom) for name in _imported(node)
    }
    return found & MODULES.keys()


def _module_level(tree: ast.Module) -> set[int]:
    """Ids of the import statements at module level (an `if` at module level, such as TYPE_CHECKING, counts)."""
    level: set[int] = set()
    body = list(tree.body)
    while body:
        node = body.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            level.add(id(node))
        elif isinstance(node, ast.If | ast.Try):
            body += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
    return level


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_service_module_imports_on_its_own(module: str) -> None:
    assert importlib.import_module(module).__name__ == module


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_service_module_imports_hourglass_modules_only_at_module_level(module: str) -> None:
    tree = MODULES[module]
    level = _module_level(tree)
    nested = [
        f"line {node.lineno}: {', '.join(_imported(node))}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in level and any(_imported(node))
    ]
    assert nested == []


def test_no_service_modules_import_each_other_round_a_circle() -> None:
    graph = {module: _edges(tree) - {module} for module, tree in MODULES.items()}
    # A package's __init__ importing its own modules is how a package exports them, not a circle.
    graph = {module: {d for d in deps if not d.startswith(module + ".")} for module, deps in graph.items()}
    circles: list[list[str]] = []
    state: dict[str, str] = {}  # "open" while on the path, "done" after

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for dep in sorted(graph[module]):
            if state.get(dep) == "open":
                circles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []
