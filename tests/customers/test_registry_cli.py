"""`pmsgate customers check-registry` / `fix-registry` through the real command line."""

from __future__ import annotations

import uuid

import httpx
import pytest

from pmsgate.config import get_settings
from pmsgate.container import open_container
from pmsgate.storage.audit import AuditFilter
from tests.customers.support import give_pms_connection

from .test_cli import add_args, assert_failed_with, cli_env, one_json, pmsgate, sandbox_truth
from .test_cli import sandbox_url as sandbox_url

pytestmark = pytest.mark.anyio
__all__ = ["cli_env", "sandbox_url"]


async def enrolled(sandbox_url: str) -> tuple[str, list[str]]:
    """A customer with a workspace, its listings and a synced registry; its room types."""
    facility, _ = await sandbox_truth(sandbox_url)
    student = f"stu-reg-{uuid.uuid4().hex[:6]}"
    assert (await pmsgate(*add_args(student, facility["kind"]))).exit_code == 0
    configured = one_json(
        await pmsgate(
            "customers", "configure-workspace", student, "--plan-limit-usd", "150", "--slug",
            student, "--json",
        )
    )  # fmt: skip
    workspace_id = configured["workspace"]["workspace_id"]
    async with httpx.AsyncClient(base_url=sandbox_url) as http:
        await give_pms_connection(http, workspace_id, facility)
    assert (await pmsgate("customers", "sync-registry", student)).exit_code == 0
    return student, sorted(str(a["id_room_type"]) for a in facility["apartments"])


async def test_a_swapped_mapping_is_checked_fixed_and_audited_from_the_command_line(
    cli_env: str, sandbox_url: str
) -> None:
    student, room_types = await enrolled(sandbox_url)
    first, second = room_types[:2]
    async with open_container(get_settings()) as container:
        apartments = container.customers.apartments
        listing = (await apartments.get(student, first)).assistant_listing_id
        await apartments.update_listing(student, first, None)
        await apartments.update_listing(student, second, listing)

    checked = one_json(await pmsgate("customers", "check-registry", student, "--json"))
    report = checked["registry"]
    assert report["status"] == "problems"
    assert {(p["kind"], p["room_type"]) for p in report["problems"]} == {
        ("not_mapped", first),
        ("room_type_mismatch", second),
    }
    human = await pmsgate("customers", "check-registry", student)
    assert human.exit_code == 0 and "room_type_mismatch" in human.stdout
    assert "fix-registry would:" in human.stdout

    dry = await pmsgate("customers", "fix-registry", student, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "would change 2" in dry.stdout
    fixed = one_json(await pmsgate("customers", "fix-registry", student, "--json"))["fix"]
    assert {(c["action"], c["room_type"]) for c in fixed["changes"]} == {
        ("attach", first),
        ("replace", second),
    }
    assert fixed["status_after"] == "ok" and fixed["left_for_a_person"] == []
    again = await pmsgate("customers", "fix-registry", student)
    assert again.exit_code == 0 and "nothing to change" in again.stdout
    assert (
        one_json(await pmsgate("customers", "check-registry", student, "--json"))["registry"][
            "status"
        ]
        == "ok"
    )

    async with open_container(get_settings()) as container:
        owner = await container.audit.owner(student)
        page = await container.audit.page(AuditFilter(owner=owner, action_prefix="registry."))
    [event] = page.events
    assert (event.actor_kind, event.actor) == ("cli", "pmsgate customers fix-registry")


async def test_fix_registry_of_an_unknown_customer_fails_with_a_hint(cli_env: str) -> None:
    assert_failed_with(
        await pmsgate("customers", "fix-registry", "stu-ghost", "--json"), "customer_not_found"
    )
    assert_failed_with(
        await pmsgate("customers", "check-registry", "stu-ghost"), "customer_not_found"
    )
