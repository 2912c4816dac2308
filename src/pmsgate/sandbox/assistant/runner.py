"""Runs a custom tool's Python code the way the platform does: ``main(**params)`` in isolation.

The code is written to a file in a fresh temporary directory and executed by a
child interpreter (``sys.executable -I``: isolated mode, so no ``PYTHON*``
variables, no user site-packages, no current directory on ``sys.path``). The
parameters arrive as JSON on stdin; the environment holds the workspace secrets
and nothing else, so the emulator's own environment (vault keys, tokens) never
reaches tool code. The tool's own prints go to stderr; the result is the last
stdout line carrying the marker, so a tool that writes to fd 1 cannot forge it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

RESULT_MARKER = "__PMSGATE_TOOL_RESULT__ "
_MESSAGE_MAX = 500

# Executed by the child interpreter: argv[1] is the tool file, stdin the parameters.
_RUNNER = r"""
import asyncio, contextlib, inspect, json, sys

MARKER = __MARKER__


def outcome():
    path = sys.argv[1]
    try:
        params = json.loads(sys.stdin.buffer.read().decode("utf-8") or "{}")
    except ValueError:
        return {"success": False, "message": "the parameters are not valid JSON"}
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    namespace = {"__name__": "__tool__", "__file__": path}
    try:
        with contextlib.redirect_stdout(sys.stderr):
            exec(compile(source, "tool.py", "exec"), namespace)
            main = namespace.get("main")
            if not callable(main):
                return {"success": False, "message": "the code defines no main(**params)"}
            value = main(**params)
            if inspect.isawaitable(value):
                value = asyncio.run(value)
    except BaseException as exc:  # the tool's failure is the answer, whatever it is
        return {"success": False, "message": f"{type(exc).__name__}: {exc}"}
    if not isinstance(value, dict) or not isinstance(value.get("message"), str):
        return {
            "success": False,
            "message": "main() must return a dict with a string 'message' and 'rawData'",
        }
    return {"success": True, "message": value["message"], "rawData": value.get("rawData")}


result = outcome()
try:
    line = json.dumps(result)
except (TypeError, ValueError):
    line = json.dumps({"success": False, "message": "rawData is not JSON-serialisable"})
sys.stdout.write("\n" + MARKER + line + "\n")
sys.stdout.flush()
""".replace("__MARKER__", repr(RESULT_MARKER))


@dataclass(frozen=True)
class RunOutcome:
    """What a tool run answered: ``{success, message, rawData}`` and how long it took."""

    success: bool
    message: str
    raw_data: Any
    duration_ms: int


async def run_python_tool(
    code: str,
    parameters: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    timeout_s: float,
) -> RunOutcome:
    """Run ``main(**parameters)`` of ``code`` in a child interpreter with ``env`` as environment."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pmsgate-tool-") as workdir:
        tool_file = anyio.Path(workdir) / "tool.py"
        await tool_file.write_text(code, encoding="utf-8")
        stdout, stderr, returncode, timed_out = await _execute(
            [sys.executable, "-I", "-c", _RUNNER, str(tool_file)],
            json.dumps(dict(parameters)).encode("utf-8"),
            dict(env),
            workdir,
            timeout_s,
        )
    elapsed = int((time.perf_counter() - started) * 1000)
    if timed_out:
        return RunOutcome(False, f"the tool did not finish within {timeout_s:g} s", None, elapsed)
    result = _result_line(stdout)
    if result is None:
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        message = f"the tool process exited with status {returncode}" + (
            f": {tail[0]}" if tail[0] else ""
        )
        return RunOutcome(False, _scrub(message, env), None, elapsed)
    success = result.get("success") is True
    message = str(result.get("message", ""))
    if not success:
        message = _scrub(message, env)
    return RunOutcome(success, message, result.get("rawData") if success else None, elapsed)


async def _execute(
    command: list[str], stdin: bytes, env: dict[str, str], cwd: str, timeout_s: float
) -> tuple[bytes, bytes, int | None, bool]:
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    async def drain(stream: anyio.abc.ByteReceiveStream | None, into: list[bytes]) -> None:
        if stream is not None:
            async for chunk in stream:
                into.append(chunk)

    async with await anyio.open_process(command, env=env, cwd=cwd) as process:
        with anyio.move_on_after(timeout_s) as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(drain, process.stdout, chunks["out"])
                group.start_soon(drain, process.stderr, chunks["err"])
                if process.stdin is not None:
                    # A tool that exits before reading its parameters closes the pipe early.
                    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await process.stdin.send(stdin)
                    await process.stdin.aclose()
                await process.wait()
        if scope.cancelled_caught:
            # Killed before leaving the block: closing waits for the process to end.
            process.kill()
    return (
        b"".join(chunks["out"]),
        b"".join(chunks["err"]),
        process.returncode,
        (scope.cancelled_caught),
    )


def _result_line(stdout: bytes) -> dict[str, Any] | None:
    for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                parsed = json.loads(line[len(RESULT_MARKER) :])
            except ValueError:
                return None
            return parsed if isinstance(parsed, dict) else None
    return None


def _scrub(message: str, env: Mapping[str, str]) -> str:
    """An error text without the workspace secrets' values, cut short."""
    for value in env.values():
        if value:
            message = message.replace(value, "***")
    return message[:_MESSAGE_MAX]
