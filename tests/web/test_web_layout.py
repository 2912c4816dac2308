"""The web package's shape: routers import no other router, no import circle, no hidden imports.

What several pages share lives in modules without routes (pmsgate.web.pages,
customer_pages, admin_pages, forms, actions); a router module (one that defines
``router``) imports only those. Read from the source, so a circle hidden in a function
or behind ``TYPE_CHECKING`` counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pmsgate.web

WEB = Path(pmsgate.web.__file__).parent


def _modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text()) for path in sorted(WEB.glob("*.py"))}


def _web_imports(tree: ast.AST) -> set[str]:
    """The pmsgate.web modules ``tree`` imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "pmsgate.web":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("pmsgate.web."):
                found.add(node.module.split(".")[2])
    return found


def _is_router(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "router" for target in node.targets)
        for node in tree.body
    )


def test_routers_import_no_other_router() -> None:
    modules = _modules()
    routers = {name for name, tree in modules.items() if _is_router(tree)}
    assert {"console", "admin_console", "incident_console", "login"} <= routers
    crossing = {
        name: sorted(_web_imports(modules[name]) & routers - {name}) for name in sorted(routers)
    }
    assert {name: found for name, found in crossing.items() if found} == {}


def test_no_import_circle_inside_web() -> None:
    graph = {name: _web_imports(tree) - {name} for name, tree in _modules().items()}
    graph.pop("__init__", None)

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in graph.get(todo.pop(), set()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    assert sorted(name for name in graph if name in reaches(name)) == []


def test_no_import_inside_a_function() -> None:
    inside = [
        f"{name}.py:{node.lineno}"
        for name, tree in _modules().items()
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert inside == []
