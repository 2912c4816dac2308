"""The runbook is an explicit list: the spec's 17 steps, in order, each declared once."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pmsgate.onboarding import registry as registry_module
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.steps import (
    BOTH_ROUTES,
    ONLY_A,
    ONLY_B,
    Step,
    StepDeclarationError,
    StepKind,
    StepResult,
    find_step,
    runbook,
)

# Spec §4.3 "Rules of the onboarding sequence", rules 1 to 17, with their kind and routes.
SPEC_RUNBOOK = [
    ("prerequisites", StepKind.CHECK, BOTH_ROUTES),  # 1 prerequisites
    ("allowlist", StepKind.AUTO, BOTH_ROUTES),  # 2 beta allowlist entry
    ("workspace-configuration", StepKind.AUTO, BOTH_ROUTES),  # 3 partner_markup configuration
    ("notes-integration", StepKind.AUTO, BOTH_ROUTES),  # 4 notes integration row connected
    ("workspace", StepKind.AUTO, BOTH_ROUTES),  # 5 workspace created, id read back
    ("custom-tools", StepKind.AUTO, BOTH_ROUTES),  # 6 the six custom tools
    ("guest-agent", StepKind.AUTO, BOTH_ROUTES),  # 7 guest agent
    ("platform-admin", StepKind.AUTO, BOTH_ROUTES),  # 8 platform-team Admin
    ("route-choice", StepKind.CHECK, BOTH_ROUTES),  # 9 route choice
    ("listings-count", StepKind.CHECK, ONLY_A),  # 10 listings = active apartments
    ("apartment-registry", StepKind.AUTO, ONLY_A),  # 11 registry rows
    ("knowledge-dry-run", StepKind.CHECK, ONLY_A),  # 12 dry run
    ("templates", StepKind.AUTO, ONLY_A),  # 13 canonical templates
    ("knowledge-commit", StepKind.AUTO, ONLY_A),  # 14 commit
    ("channels", StepKind.MANUAL, BOTH_ROUTES),  # 15 channels
    ("onboarding-message", StepKind.AUTO, BOTH_ROUTES),  # 16 onboarding message
    ("route-b-quick-setup", StepKind.AUTO, ONLY_B),  # 17 Route B quick setup
]


async def _never(_ctx: object) -> StepResult:
    raise AssertionError("not called")


def _step(number: int, step_id: str, **changes: object) -> Step:
    fields = {
        "number": number,
        "id": step_id,
        "title": step_id,
        "kind": StepKind.CHECK,
        "routes": BOTH_ROUTES,
        "check": _never,
        **changes,
    }
    return Step(**fields)  # type: ignore[arg-type]


def test_the_registry_is_the_spec_runbook_in_order() -> None:
    assert [(s.id, s.kind, s.routes) for s in STEPS] == SPEC_RUNBOOK
    assert [s.number for s in STEPS] == list(range(1, 18))


def test_the_documented_steps_are_the_registrys() -> None:
    doc = Path(__file__).parents[2] / "docs" / "onboarding.md"
    rows = re.findall(r"^\| (\d+) \| `([a-z0-9-]+)` \| (\w+) \|", doc.read_text(), re.M)
    assert rows == [(str(s.number), s.id, str(s.kind)) for s in STEPS]


def test_every_auto_step_applies_and_says_what_it_would_do() -> None:
    for step in STEPS:
        auto = step.kind is StepKind.AUTO
        assert (step.apply is not None, step.describe is not None) == (auto, auto), step.id


def test_only_the_channels_step_has_manual_items_each_with_its_text() -> None:
    with_items = [s for s in STEPS if s.items]
    assert [s.id for s in with_items] == ["channels"]
    channels = with_items[0]
    assert channels.item_ids == (
        "whatsapp-number",
        "voice-agent",
        "check-call",
        "check-whatsapp",
        "check-escalation",
    )
    assert all(item.text for item in channels.items)
    assert [item.id for item in channels.items if item.dated] == ["whatsapp-number"]


def test_a_repeated_or_misnumbered_step_fails_at_once() -> None:
    with pytest.raises(StepDeclarationError, match="appears twice"):
        runbook(_step(1, "one"), _step(2, "one"))
    with pytest.raises(StepDeclarationError, match="no step 2"):
        runbook(_step(1, "one"), _step(3, "three"))
    with pytest.raises(StepDeclarationError, match="number 2 is used twice: two, deux"):
        runbook(_step(1, "one"), _step(2, "two"), _step(2, "deux"))
    assert runbook(*STEPS) == STEPS


def test_a_step_number_is_written_once_and_orders_the_runbook() -> None:
    """The number is the step's own; the runbook is ordered by it, not by where it is named."""
    assert [step.number for step in STEPS] == list(range(1, 18))
    one, two, three = _step(1, "one"), _step(2, "two"), _step(3, "three")
    assert runbook(three, one, two) == (one, two, three)
    registry = Path(registry_module.__file__).read_text()
    assert not re.search(r"#\s*\d+\s*$", registry, re.MULTILINE), "no step numbers in comments"


def test_an_inconsistent_declaration_fails_at_once() -> None:
    with pytest.raises(StepDeclarationError, match="kebab-case"):
        _step(1, "Not_Kebab")
    with pytest.raises(StepDeclarationError, match="auto"):
        _step(1, "auto-without-apply", kind=StepKind.AUTO)
    with pytest.raises(StepDeclarationError, match="auto"):
        _step(1, "check-with-apply", apply=_never)
    channels = find_step(STEPS, "channels")
    assert channels is not None
    with pytest.raises(StepDeclarationError, match="repeat"):
        dataclasses.replace(channels, items=(*channels.items, channels.items[0]))


def test_steps_are_found_by_id_or_number_and_unknown_ones_are_none() -> None:
    assert find_step(STEPS, "15") is find_step(STEPS, " channels ")
    assert find_step(STEPS, "chanels") is None and find_step(STEPS, "18") is None
