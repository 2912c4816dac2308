"""Every repository takes a session and never commits (docs/architecture.md, "Repositories
and services").

Each module under ``src/pmsgate/storage`` is parsed (not imported): only ``db.py``, which
builds the sessionmaker, and ``records.py``, the base of the records services (one
transaction per call), may name ``async_sessionmaker``, and no other module calls ``commit``
or opens a transaction with ``begin``. The services own the unit of work; a repository that
committed on its own would split a service's transaction in two.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pmsgate.storage

STORAGE = Path(pmsgate.storage.__file__).parent
# The engine and the sessionmaker the services take, and the services' base: no repository.
UNIT_OF_WORK = {"db.py", "records.py"}
MODULES = sorted(path for path in STORAGE.glob("*.py") if path.name not in UNIT_OF_WORK)


def _unit_of_work_uses(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name | ast.alias) and "async_sessionmaker" in (
            node.id if isinstance(node, ast.Name) else node.name
        ):
            found.append(f"line {node.lineno}: async_sessionmaker")
        elif isinstance(node, ast.Attribute) and node.attr in {"commit", "begin"}:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_every_repository_module_is_checked() -> None:
    names = {path.name for path in MODULES}
    assert {"integrations.py", "knowledge.py", "customers.py", "apartments.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_a_repository_works_in_the_callers_session(path: Path) -> None:
    assert _unit_of_work_uses(path.read_text()) == []


def test_the_check_sees_a_sessionmaker_and_a_commit() -> None:
    source = (
        "from sqlalchemy.ext.asyncio import async_sessionmaker\n"
        "async def add(sessions: async_sessionmaker) -> None:\n"
        "    async with sessions.begin() as session:\n"
        "        await session.commit()\n"
    )
    assert _unit_of_work_uses(source) == [
        "line 1: async_sessionmaker",
        "line 2: async_sessionmaker",
        "line 3: .begin",
        "line 4: .commit",
    ]
