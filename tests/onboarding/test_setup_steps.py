"""Steps 1-5, 8, 15 and 16 on the in-process sandbox, each check and apply on its own.

The services are the real ones on the emulators (tests/onboarding/sandbox_customer.py);
checks are read-only, so a check after an apply proves the apply, and a second apply
of a done step writes nothing upstream.
"""

from __future__ import annotations

import email
import email.policy
from datetime import date, timedelta
from pathlib import Path

import pytest

from pmsgate.errors import PmsgateError
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.steps import ROUTE_B, OnboardingContext, StepKind, StepResult
from pmsgate.onboarding.steps_channels import (
    apply_onboarding_message,
    check_channels,
    check_onboarding_message,
    outbox_path,
)
from pmsgate.onboarding.steps_setup import (
    apply_allowlist,
    apply_notion_integration,
    apply_platform_admin,
    apply_workspace,
    apply_workspace_configuration,
    check_allowlist,
    check_notion_integration,
    check_platform_admin,
    check_prerequisites,
    check_workspace,
    check_workspace_configuration,
    ensure_facility,
)
from tests.onboarding.sandbox_customer import PLATFORM_ADMIN, OnboardingSandbox

pytestmark = pytest.mark.anyio


async def enrolled_through_step_5(box: OnboardingSandbox, ctx: OnboardingContext) -> None:
    await apply_workspace_configuration(ctx)
    await apply_notion_integration(ctx)
    await apply_workspace(ctx)


# --- 1 prerequisites ---------------------------------------------------------------------------


async def test_prerequisites_verify_every_sub_check_and_write_nothing(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file())
    result = await check_prerequisites(ctx)
    assert result.done and not result.stop
    evidence = result.evidence
    assert {k: evidence[k]["ok"] for k in evidence} == {
        "subscription": True,
        "platform": True,
        "notes": True,
        "booking_system": True,
    }
    assert evidence["notes"]["apartment_pages"] == len(box.notes["pages"])
    assert ctx.run.booking_system_authenticated is True
    assert await box.services.customers.customers.find(box.student_id) is None
    assert box.upstream_writes() == {"platform": 0, "notes": 0}


async def test_a_wrong_booking_system_password_stops_with_the_reason_and_the_fix(
    box: OnboardingSandbox,
) -> None:
    box.env[f"KROSS_PASSWORD_{box.hotel_id}"] = "wrong-password-1"
    result = await check_prerequisites(box.services.context(box.file()))
    assert not result.done and result.stop
    assert "booking system rejected the credentials" in result.message
    assert result.fix is not None and box.facility["username"] in result.fix
    assert result.evidence["booking_system"]["error"] == "pms_auth_failed"
    # The others are still reported: one run shows every missing prerequisite.
    assert result.evidence["notes"]["ok"] and result.evidence["platform"]["ok"]
    assert "wrong-password-1" not in repr(result)


async def test_a_subscription_off_the_contract_price_and_a_refused_notion_token_stop_the_run(
    box: OnboardingSandbox,
) -> None:
    box.env[f"NOTION_TOKEN_{box.hotel_id}"] = "ntn_not_a_real_token_0000"
    file = box.file(subscription__price_id="price_other")
    result = await check_prerequisites(box.services.context(file))
    assert result.stop
    assert not result.evidence["subscription"]["ok"]
    assert result.evidence["notes"]["error"] == "notes_unauthorized"
    assert result.fix is not None and "price_sandbox_partner" in result.fix
    assert "integration token" in result.fix


# --- 2 allowlist -------------------------------------------------------------------------------


async def test_allowlist_entry_carries_the_runbook_comment_and_needs_no_deploy(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file(contract__signed_on="2026-11-18"))
    assert not (await check_allowlist(ctx)).done
    ctx.run.notion_apartment_pages = 4
    await apply_allowlist(ctx)
    result = await check_allowlist(ctx)
    assert result.done
    assert result.evidence["comment"] == (
        f"2026-11-18 · contract C-{box.hotel_id} · workspace sandbox-{box.hotel_id} · "
        f"4 apartments · subscription sub_{box.hotel_id} active"
    )
    assert "no deploy" in result.evidence["takes_effect"]
    assert await box.services.customers.allowlist.find(box.document["email"]) is not None


# --- 3 workspace configuration and the facility ------------------------------------------------


async def test_workspace_configuration_registers_customer_and_links_a_gateway_facility(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file())
    assert not (await check_workspace_configuration(ctx)).done
    await apply_workspace_configuration(ctx)
    result = await check_workspace_configuration(ctx)
    assert result.done, result.message
    assert result.evidence["billing_mode"] == "partner_markup"
    row_id = result.evidence["pms_integration_id"]
    assert row_id != box.student_id and row_id.startswith("int-")
    facility = await box.services.facilities.get(box.hotel_id)
    assert facility.integration_id == row_id and facility.status == "connected"
    # The key minted at registration was never shown: it is revoked at once.
    keys = await box.services.facilities.list_keys(box.hotel_id)
    assert keys and all(key.revoked_at is not None for key in keys)
    customer = (await ctx.customer_context()).customer
    assert customer.subscription_active_on_contract_price
    assert box.upstream_writes()["platform"] == 0


async def test_the_integration_row_id_of_the_file_is_kept_and_a_mismatch_is_refused(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file(booking_system__integration_id="int-from-the-file"))
    await apply_workspace_configuration(ctx)
    context = await ctx.customer_context()
    assert context.kross is not None and context.kross.id == "int-from-the-file"
    assert context.hotel_id == box.hotel_id
    other = box.services.context(box.file(booking_system__integration_id="int-another-one"))
    with pytest.raises(PmsgateError) as caught:
        await ensure_facility(other)
    assert caught.value.code == "pms_integration_mismatch"


async def test_ensure_facility_is_idempotent_and_follows_a_changed_password(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file())
    await apply_workspace_configuration(ctx)
    first = await ensure_facility(ctx)
    assert (await ensure_facility(ctx)).updated_at == first.updated_at
    # The customer changed the API password; the new one is in the file.
    box.sandbox.kross.change_password(box.hotel_id, "a-new-password-42")
    box.env[f"KROSS_PASSWORD_{box.hotel_id}"] = "a-new-password-42"
    changed = box.services.context(box.file())
    assert not (await check_workspace_configuration(changed)).done
    await apply_workspace_configuration(changed)
    assert (await check_workspace_configuration(changed)).done
    stored = await box.services.facilities.credentials(box.hotel_id)
    assert stored.password.get_secret_value() == "a-new-password-42"


# --- 4 notes, 5 workspace ----------------------------------------------------------------------


async def test_notion_integration_is_connected_with_the_token_stored_encrypted(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file())
    await apply_workspace_configuration(ctx)
    assert not (await check_notion_integration(ctx)).done
    await apply_notion_integration(ctx)
    result = await check_notion_integration(ctx)
    assert result.done
    assert result.evidence["provider"] == "notes" and result.evidence["status"] == "connected"
    assert result.evidence["token"] == "stored encrypted"
    assert box.notes["token"] not in repr(result)
    # Another token in the file: the step is not done until it is stored.
    box.env[f"NOTION_TOKEN_{box.hotel_id}"] = "ntn_other_token_value"
    assert not (await check_notion_integration(box.services.context(box.file()))).done


async def test_workspace_is_created_once_and_its_id_read_back(box: OnboardingSandbox) -> None:
    ctx = box.services.context(box.file())
    await apply_workspace_configuration(ctx)
    assert not (await check_workspace(ctx)).done
    await apply_workspace(ctx)
    result = await check_workspace(ctx)
    assert result.done and result.evidence["slug"] == f"sandbox-{box.hotel_id}"
    ids = [w.id for w in box.sandbox.assistant.workspaces()]
    assert result.evidence["workspace_id"] in ids
    writes = box.upstream_writes()
    await apply_workspace(ctx)
    assert box.upstream_writes() == writes
    assert len(box.sandbox.assistant.workspaces()) == len(ids)


# --- 8 platform-team admin ---------------------------------------------------------------------


async def test_a_assistant_team_member_becomes_admin_and_a_viewer_is_promoted(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file())
    assert not (await check_platform_admin(ctx)).done  # no workspace yet
    await enrolled_through_step_5(box, ctx)
    await apply_platform_admin(ctx)
    result = await check_platform_admin(ctx)
    assert result.done and result.evidence["admins"] == [PLATFORM_ADMIN]
    # Someone of the platform team is only a Viewer in another customer's workspace.
    workspace_id = result.evidence["workspace_id"]
    member = next(
        m for m in box.sandbox.assistant.members(workspace_id) if m.email == PLATFORM_ADMIN
    )
    box.sandbox.assistant.set_member_role(workspace_id, member.id, "Viewer")
    assert not (await check_platform_admin(ctx)).done
    await apply_platform_admin(ctx)
    assert (await check_platform_admin(ctx)).done


# --- 15 channels -------------------------------------------------------------------------------


async def test_channels_wait_for_a_person_with_the_whatsapp_due_date(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file(channels__whatsapp_requested_on="2026-11-20"))
    result = await check_channels(ctx)
    assert not result.done and result.waiting_for is not None
    assert result.evidence["required_items"] == [
        "whatsapp-number",
        "voice-agent",
        "check-call",
        "check-whatsapp",
        "check-escalation",
    ]
    assert result.due == date(2026, 11, 30)
    assert "`it` only (never multilingual)" in result.waiting_for
    assert "+39 031 555 0199" in result.waiting_for
    # A person's evidence for every item: done.
    ctx.manual_evidence["channels"] = {
        "items": {
            item: {"evidence": f"{item} ok", "confirmed_at": "2026-11-25T10:00:00+00:00"}
            for item in result.evidence["required_items"]
        }
    }
    done = await check_channels(ctx)
    assert done.done and done.due is None
    assert done.evidence["items"]["check-call"]["evidence"] == "check-call ok"


async def test_channels_ask_only_for_what_the_file_requests(box: OnboardingSandbox) -> None:
    ctx = box.services.context(box.file(channels={"whatsapp_number": False, "voice_agent": None}))
    result = await check_channels(ctx)
    # The voice-agent items are always required (spec step 15); WhatsApp follows the file.
    assert result.evidence["required_items"] == [
        "voice-agent",
        "check-call",
        "check-escalation",
    ]
    assert result.due is None
    today = box.clock.now().date()
    ctx = box.services.context(box.file())
    assert (await check_channels(ctx)).due == today + timedelta(days=10)


# --- 16 onboarding message ---------------------------------------------------------------------


async def test_onboarding_message_goes_to_the_outbox_once_with_the_baseline(
    box: OnboardingSandbox, tmp_path: Path
) -> None:
    ctx = box.services.context(box.file(language="en"))
    await enrolled_through_step_5(box, ctx)
    waiting = await check_onboarding_message(ctx)
    assert not waiting.done and waiting.waiting_for is not None  # the route is not chosen
    # As the runner leaves it once every automatable step of Route B held in the run.
    ctx.route = ROUTE_B
    for step in STEPS:
        if step.kind is not StepKind.MANUAL and ROUTE_B in step.routes:
            ctx.run.results[step.id] = StepResult(done=True)
    assert not (await check_onboarding_message(ctx)).done
    await apply_onboarding_message(ctx)
    result = await check_onboarding_message(ctx)
    assert result.done
    path = outbox_path(ctx)
    assert path == tmp_path / "outbox" / f"{box.student_id}-onboarding.eml"
    message_id = result.evidence["message"]["message_id"]
    assert message_id == f"<onboarding.{box.student_id}@localhost>"
    assert result.evidence["message"]["transport"] == "outbox"
    assert result.evidence["baseline"]["usd_spent"] == "0.0000"
    sent = path.read_bytes()
    message = email.message_from_bytes(sent, policy=email.policy.default)
    assert message["To"] == box.document["email"]
    text = message.get_body(preferencelist=("plain",)).get_content()  # type: ignore[union-attr]
    html = message.get_body(preferencelist=("html",)).get_content()  # type: ignore[union-attr]
    for body in (text, html):
        assert f"{box.settings.console_url}/login" in body  # the console's own sign-in
        assert "https://cal.example/platform-team/15min" in body
        assert "15-minute demo call" in body
    for secret in box.secrets():
        assert secret.encode() not in sent
    # A second apply sends nothing and records no second baseline.
    box.clock.advance(3600)
    await apply_onboarding_message(ctx)
    assert path.read_bytes() == sent
    baseline = await box.services.customers.usage.baseline(box.student_id)
    assert (
        baseline is not None
        and baseline.taken_at.isoformat() == (result.evidence["baseline"]["taken_at"])
    )


async def test_a_facility_left_in_error_is_verified_and_connected_again(
    box: OnboardingSandbox,
) -> None:
    ctx = box.services.context(box.file())
    await apply_workspace_configuration(ctx)
    await box.services.facilities.mark_error(box.hotel_id, "authentication failed earlier")
    result = await check_workspace_configuration(ctx)
    assert not result.done and "in error" in result.message
    await apply_workspace_configuration(ctx)
    assert (await check_workspace_configuration(ctx)).done
    context = await ctx.customer_context()
    assert context.kross_connected
