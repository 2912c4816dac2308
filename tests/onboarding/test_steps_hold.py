"""Steps 14 and 15 hold what the spec says (issue 16).

- Step 14: "about 30 to 40 nodes per apartment" is checked — an apartment outside it is a
  warning with the reason; the step still completes and the checklist shows the warning.
- Step 15: the voice-agent items are always listed, with or without a voice section.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from pmsgate.onboarding.report import StepOutcome, outcomes_table
from pmsgate.onboarding.steps_channels import check_channels
from pmsgate.onboarding.steps_knowledge import (
    KNOWLEDGE_COMMIT,
    _node_count_warnings,
    _SyncedApartment,
    apply_knowledge_commit,
    apply_templates,
    check_knowledge_commit,
    check_templates,
)

from .sandbox_customer import onboarding_sandbox
from .step_support import onboarding_context, run_step, step_sandbox

pytestmark = pytest.mark.anyio


def synced(room_type: str, nodes: int) -> _SyncedApartment:
    return _SyncedApartment(
        room_type=room_type, listing_id=f"l-{room_type}", nodes=nodes, nodes_match=True
    )


def test_apartments_outside_30_to_40_nodes_are_warnings_with_the_reason() -> None:
    warnings = _node_count_warnings(
        [synced("101", 41), synced("102", 35), synced("103", 30), synced("104", 12)]
    )
    assert len(warnings) == 2
    assert warnings[0].startswith("room type 101: 41 nodes, outside the 30-40")
    assert "more than expected" in warnings[0]
    assert warnings[1].startswith("room type 104: 12 nodes")
    assert "fewer than expected" in warnings[1]


def test_the_checklist_shows_a_done_step_with_its_warning() -> None:
    outcome = StepOutcome(
        number=14,
        id=KNOWLEDGE_COMMIT.id,
        title=KNOWLEDGE_COMMIT.title,
        kind="auto",
        status="done",
        done=True,
        message="4 listings synced",
        evidence={"warnings": ["room type 101: 41 nodes, outside the 30-40 per apartment"]},
    )
    assert outcome.as_dict()["warnings"] == outcome.warnings
    console = Console(width=200, record=True)
    console.print(outcomes_table([outcome], title="checklist"))
    shown = console.export_text()
    assert "done" in shown and "warning: room type 101: 41 nodes" in shown


async def test_a_real_commit_warns_exactly_for_the_apartments_outside_the_range(
    database_url: str,
) -> None:
    async with step_sandbox(database_url, seed=7, student_index=1) as enrolled:
        ctx = onboarding_context(enrolled)
        await run_step(ctx, check_templates, apply_templates)
        _, commit = await run_step(ctx, check_knowledge_commit, apply_knowledge_commit)
    assert commit.done is True, commit.message
    per_apartment = commit.evidence["nodes_per_apartment"]
    outside = [rt for rt, n in per_apartment.items() if not 30 <= n <= 40]
    warned = [w.split(":")[0] for w in commit.evidence.get("warnings", [])]
    assert warned == [f"room type {rt}" for rt in outside]
    assert ("warning" in commit.message) == bool(outside)


async def test_the_voice_agent_items_are_listed_even_without_a_voice_section(
    database_url: str, tmp_path: Path
) -> None:
    async with onboarding_sandbox(database_url, tmp_path) as box:
        ctx = box.services.context(box.file(channels={"whatsapp_number": False}))
        result = await check_channels(ctx)
    assert result.evidence["required_items"] == ["voice-agent", "check-call", "check-escalation"]
    assert "channels.voice_agent" in result.evidence["items"]["voice-agent"]["what"]
    assert result.waiting_for is not None and "[voice-agent]" in result.waiting_for
