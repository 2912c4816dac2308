"""Only entry points import the composition root (docs/architecture.md, "The composition root").

Every module under ``src/pmsgate`` is parsed (not imported): a module that names
``pmsgate.container`` (where the one container is built) or ``pmsgate.app`` (the app
factory) in an import must be an entry point — the app factory, a CLI module, the
doctor's runner or the demo. Anything below takes the container's attributes as
arguments instead, so no import cycle needs dodging.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pmsgate

SRC = Path(pmsgate.__file__).parent
ROOTS = ("pmsgate.container", "pmsgate.app")


def _is_entry_point(relative: Path) -> bool:
    name = relative.as_posix()
    return name in {"app.py", "container.py", "doctor/runner.py"} or name.startswith(
        ("cli/", "demo/")
    )


def _roots_imported(source: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if node.module == "pmsgate":
                found += [(node.lineno, f"pmsgate.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name in ROOTS]


def test_no_module_below_the_entry_points_imports_the_composition_root() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{line} imports {name}"
        for path in sorted(SRC.rglob("*.py"))
        if not _is_entry_point(path.relative_to(SRC))
        for line, name in _roots_imported(path.read_text())
    ]
    assert offenders == []


def test_the_check_sees_every_spelling_of_an_import_of_the_root() -> None:
    # The parser above must find them, or the test would pass vacuously.
    source = (
        "import pmsgate.app\n"
        "from pmsgate.container import Container\n"
        "from pmsgate import container\n"
        "def late():\n"
        "    from pmsgate.app import create_app\n"
    )
    assert _roots_imported(source) == [
        (1, "pmsgate.app"),
        (2, "pmsgate.container"),
        (3, "pmsgate.container"),
        (5, "pmsgate.app"),
    ]
