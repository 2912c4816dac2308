"""The import graph has no circles inside a package, and no import hides inside a function
without saying why (docs/architecture.md, Rules).

**Circles.** Inside every package (``pmsgate`` itself, ``pmsgate.jobs``, ``pmsgate.web`` …),
its direct children — modules, and subpackages taken as one node with everything under
them — must import each other without a circle. Shared things move down into a module
both import (e.g. ``jobs/spec.py``, which the job modules and the scheduler both use).

Imports under ``if TYPE_CHECKING:`` are left out (grimp tells them apart): they never run,
and they are how a module names, in annotations only, a type whose module uses it in turn
(the onboarding run's state names the booking results that booking.py computes from it).
Every other import counts, including one inside a function: moving an import into a
function hides a circle, it does not remove it.

**Function-level imports.** An import inside a function body needs a reason — a comment
(``# …``, not only a ``# noqa``/``# type:`` pragma) on its line or on the line above; a
run of consecutive import lines shares the comment above its first line. The accepted
reason is a start-up cost (``pmsgate --help`` must not load the whole stack; an optional
extra that may be missing), never a circle.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import grimp

SRC = Path(__file__).parent.parent / "src" / "pmsgate"
PRAGMA = re.compile(r"(noqa|type:|pragma|pyright:|mypy:|fmt:)", re.IGNORECASE)


def _graph() -> grimp.ImportGraph:
    # No cache: a stale one (the flag below is not part of its key) would hide a circle.
    return grimp.build_graph("pmsgate", exclude_type_checking_imports=True, cache_dir=None)


def _child(package: str, module: str) -> str:
    """The direct child of ``package`` that ``module`` is, or lives under."""
    return f"{package}.{module[len(package) + 1 :].split('.')[0]}"


def _sibling_edges(graph: grimp.ImportGraph, package: str) -> dict[str, dict[str, str]]:
    """child → {imported child: one import line behind it} among ``package``'s children."""
    edges: dict[str, dict[str, str]] = {}
    for module in graph.find_descendants(package):
        importer = _child(package, module)
        edges.setdefault(importer, {})
        for imported in graph.find_modules_directly_imported_by(module):
            if not imported.startswith(f"{package}."):
                continue
            target = _child(package, imported)
            if target == importer or target in edges[importer]:
                continue
            details = graph.get_import_details(importer=module, imported=imported)
            line = f"{module}:{details[0]['line_number']}" if details else module
            edges[importer][target] = line
    return edges


def _strongly_connected(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """The groups of nodes that reach each other (Tarjan, iterative), larger than one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, {})))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def _a_circle(edges: dict[str, dict[str, str]], group: list[str]) -> list[str]:
    """One circle through the group's first node, each step with an import behind it."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(edges.get(node, {})):
            if target not in members:
                continue
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                path.reverse()
                return [
                    f"{a} -> {b}  ({edges[a][b]})"
                    for a, b in zip(path, [*path[1:], start], strict=True)
                ]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise AssertionError(f"no circle through {start}")  # pragma: no cover


def circles() -> list[str]:
    """Every circle among the children of one package, told with one import per step."""
    graph = _graph()
    packages = sorted(
        module for module in graph.modules if graph.find_children(module) or module == "pmsgate"
    )
    found = []
    for package in packages:
        edges = _sibling_edges(graph, package)
        for group in _strongly_connected(edges):
            steps = "\n    ".join(_a_circle(edges, group))
            found.append(f"{package}: {', '.join(group)}\n    {steps}")
    return found


def test_no_circle_inside_any_package() -> None:
    found = circles()
    assert not found, "import circles inside a package:\n" + "\n".join(found)


def _function_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    def walk(node: ast.AST, in_function: bool) -> Iterator[ast.Import | ast.ImportFrom]:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            yield from walk(child, inside)

    return walk(tree, False)


def _reason(line: str) -> bool:
    """Whether ``line`` carries a comment that says something (not only a pragma)."""
    if "#" not in line:
        return False
    parts = (part.strip() for part in line.partition("#")[2].split("#"))
    return any(part and not PRAGMA.match(part) for part in parts)


def unexplained_function_imports() -> list[str]:
    """``path:line: import`` of every function-level import without a reason comment."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        import_lines: set[int] = set()
        tree = ast.parse(source)
        imports = list(_function_imports(tree))
        for node in imports:
            import_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        for node in imports:
            explained = _reason(lines[node.lineno - 1])
            above = node.lineno - 1
            while not explained and above >= 1:
                text = lines[above - 1].strip()
                if above in import_lines:
                    above -= 1  # the run of imports shares the comment above its first line
                    continue
                explained = text.startswith("#") and _reason(text)
                break
            if not explained:
                where = path.relative_to(SRC.parent)
                found.append(f"{where}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def test_every_function_level_import_says_why() -> None:
    found = unexplained_function_imports()
    assert not found, (
        "imports inside a function without a reason comment (move them to the top of the "
        "module, or say on the line above what start-up cost they avoid):\n" + "\n".join(found)
    )


def test_the_checks_see_a_circle_and_an_unexplained_import(tmp_path: Path) -> None:
    edges = {"p.a": {"p.b": "p.a:3"}, "p.b": {"p.c": "p.b:4"}, "p.c": {"p.a": "p.c:5"}, "p.d": {}}
    [group] = _strongly_connected(edges)
    assert group == ["p.a", "p.b", "p.c"]
    assert _a_circle(edges, group) == [
        "p.a -> p.b  (p.a:3)",
        "p.b -> p.c  (p.b:4)",
        "p.c -> p.a  (p.c:5)",
    ]
    assert _strongly_connected({"p.a": {"p.b": "x"}, "p.b": {}}) == []
    assert _reason("    import x  # the CLI starts fast without it")
    assert not _reason("    import x  # noqa: F401")
    assert not _reason("    import x")
    tree = ast.parse("import a\n\ndef f():\n    import b\n    if x:\n        from c import d\n")
    assert [node.lineno for node in _function_imports(tree)] == [4, 6]
