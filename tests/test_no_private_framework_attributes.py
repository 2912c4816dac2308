"""No code of ours reaches into a web framework's private parts (FastAPI, Starlette, uvicorn).

A private name (``fastapi.routing._effective_route_context_var``, ``starlette._utils``) may be
renamed or removed by any release; code relying on one breaks silently, or falls back to a
slow path nobody notices. Only public, documented names are used: this test reads every
module of ``src/pmsgate`` and fails on an ``_``-prefixed name taken from one of them,
however it is reached (attribute, import, ``getattr`` with a string).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "pmsgate"
FRAMEWORKS = ("fastapi", "starlette", "uvicorn")
_FRAMEWORK = "|".join(FRAMEWORKS)
# Text patterns, for what an import alias would hide from the AST check below too.
PATTERNS = [
    re.compile(rf"\b(?:{_FRAMEWORK})(?:\.\w+)*\._[a-zA-Z]"),  # fastapi.routing._x, starlette._utils
    re.compile(rf"getattr\(\s*(?:{_FRAMEWORK})[\w.]*\s*,\s*[\"']_"),  # getattr(fastapi.x, "_y")
]


def _framework_modules(tree: ast.Module) -> dict[str, str]:
    """Local names bound to a framework module or object: ``{name: dotted origin}``."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FRAMEWORKS:
                    bound[(alias.asname or alias.name).split(".")[0]] = alias.name
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] in FRAMEWORKS
        ):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _private_uses(text: str, where: str) -> list[str]:
    found = [
        f"{where}: {match.group(0)!r}" for pattern in PATTERNS for match in pattern.finditer(text)
    ]
    tree = ast.parse(text)
    bound = _framework_modules(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in FRAMEWORKS:
                parts = [*node.module.split("."), *(a.name for a in node.names)]
                if any(part.startswith("_") for part in parts):
                    found.append(f"{where}:{node.lineno}: from {node.module}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append(f"{where}:{node.lineno}: {base.id}….{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("_")
        ):
            base = node.args[0]
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append(f"{where}:{node.lineno}: getattr({base.id}…)")
    return found


def test_no_module_of_ours_uses_a_private_name_of_fastapi_starlette_or_uvicorn() -> None:
    modules = sorted(SRC.rglob("*.py"))
    assert len(modules) > 50  # the package, not an empty directory
    found = [
        use
        for path in modules
        for use in _private_uses(path.read_text(), str(path.relative_to(SRC)))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "import fastapi.routing\nx = getattr(fastapi.routing, '_effective_route_context_var')\n",
        "import fastapi.routing\nx = fastapi.routing._effective_route_context_var\n",
        "from starlette._utils import get_route_path\n",
        "from fastapi.routing import _effective_route_context_var\n",
        "import starlette.routing as r\nx = r._thing\n",
        "from starlette import routing\nx = getattr(routing, '_thing', None)\n",
    ],
)
def test_the_check_finds_each_way_of_reaching_a_private_name(source: str) -> None:
    assert _private_uses(source, "probe.py") != []
