"""storage/ is the bottom layer: its modules import nothing above it.

Every module under ``src/pmsgate/storage`` is parsed (not imported) and each
``import pmsgate.…`` / ``from pmsgate… import`` must name storage itself or one of
the few neutral modules below it. A repository that reached up into the gateway,
the customers or the web app would make those layers import each other through
storage; this test fails on the first such line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pmsgate.storage

STORAGE = Path(pmsgate.storage.__file__).parent
# What storage may import from the project: itself and the clock. Not even pmsgate.errors:
# codes, messages and hints are the services'; storage lets the database's errors through.
ALLOWED = ("pmsgate.storage", "pmsgate.clock")


def _project_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append((node.lineno, "pmsgate.storage"))  # relative: stays inside storage
    return [(line, name) for line, name in found if name.split(".")[0] == "pmsgate"]


def _allowed(module: str) -> bool:
    return any(module == allowed or module.startswith(f"{allowed}.") for allowed in ALLOWED)


MODULES = sorted(STORAGE.rglob("*.py"))


def test_every_storage_module_is_checked() -> None:
    names = {path.name for path in MODULES}
    assert {"models.py", "db.py", "gateway_usage.py", "integrations.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(STORAGE)))
def test_storage_imports_nothing_above_it(path: Path) -> None:
    above = [
        f"{path.relative_to(STORAGE)}:{line} imports {module}"
        for line, module in _project_imports(path)
        if not _allowed(module)
    ]
    assert above == []


def test_the_check_sees_a_higher_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("from pmsgate.gateway.usage import HourCounts\nimport pmsgate.web.auth\n")
    assert [name for _, name in _project_imports(module) if not _allowed(name)] == [
        "pmsgate.gateway.usage",
        "pmsgate.web.auth",
    ]
