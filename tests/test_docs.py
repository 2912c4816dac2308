"""The README documents every setting, and the quick start is exactly the two commands."""

from __future__ import annotations

from pathlib import Path

from pmsgate.config import Settings

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_readme_lists_every_setting_as_an_environment_variable():
    missing = [
        f"PMSGATE_{name.upper()}"
        for name in Settings.model_fields
        if f"`PMSGATE_{name.upper()}`" not in README
    ]
    assert missing == []


def test_readme_quick_start_is_make_demo_and_make_test():
    quick_start = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick_start.splitlines()]
    assert [c for c in commands if c.startswith("make")] == ["make demo", "make test"]
