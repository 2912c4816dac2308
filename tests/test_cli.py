"""The root of the `pmsgate` command line: its groups are loaded only when run."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from pmsgate.cli import LAZY_GROUPS, app


@pytest.mark.parametrize("name", sorted(LAZY_GROUPS))
def test_each_lazy_group_is_listed_with_its_own_help(name: str) -> None:
    group = LAZY_GROUPS[name]
    assert group.load().info.help == group.help


def test_the_root_help_lists_every_group_without_importing_any() -> None:
    probe = (
        "import sys; from typer.testing import CliRunner; from pmsgate.cli import app; "
        "out = CliRunner().invoke(app, ['--help']).output; "
        "print(all(name in out for name in ('users', 'jobs', 'onboard', 'facilities'))); "
        "print(sorted(m for m in sys.modules if m.startswith('pmsgate.cli')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    listed, imported = done.stdout.splitlines()
    assert listed == "True"
    assert imported == "['pmsgate.cli', 'pmsgate.cli.support']"


def test_a_lazy_group_runs_when_named() -> None:
    result = CliRunner().invoke(app, ["users", "--help"])
    assert result.exit_code == 0
    assert "set-password" in result.output
