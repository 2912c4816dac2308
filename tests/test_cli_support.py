"""How a command's failure inside a task group ends: a clear error, never a traceback."""

from __future__ import annotations

import anyio
import pytest
import typer

from pmsgate.cli.support import run
from pmsgate.errors import NotFound
from pmsgate.integrations.assistant.errors import AssistantUnavailable


async def _failing_in_a_task_group(*errors: Exception) -> None:
    async def raise_(error: Exception) -> None:
        raise error

    async with anyio.create_task_group() as outer:
        async with anyio.create_task_group() as inner:
            for error in errors:
                inner.start_soon(raise_, error)
        outer.start_soon(anyio.sleep, 0)


def _ended_with_exit_2(capsys: pytest.CaptureFixture[str], *errors: Exception) -> str:
    """Run a command failing with ``errors`` in nested task groups; it ends with exit status
    2; what it wrote on standard error."""
    with pytest.raises(typer.Exit) as ended:
        run(_failing_in_a_task_group(*errors))
    assert ended.value.exit_code == 2
    return capsys.readouterr().err


def test_a_service_error_inside_nested_task_groups_ends_with_its_code_and_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _ended_with_exit_2(capsys, RuntimeError("noise"), NotFound("No such customer x."))
    assert "error not_found: No such customer x." in err and "hint:" in err
    assert "Traceback" not in err and "ExceptionGroup" not in err


def test_an_upstream_error_inside_a_task_group_ends_as_a_service_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _ended_with_exit_2(capsys, AssistantUnavailable("The platform is down."))
    assert f"error {AssistantUnavailable.code}:" in err and "assistant platform" in err


def test_an_unexpected_error_inside_a_task_group_is_an_internal_error_naming_its_type(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _ended_with_exit_2(capsys, KeyError("x"))
    assert "error internal_error:" in err and "KeyError" in err and "Traceback" not in err
