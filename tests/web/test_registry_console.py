"""The console's registry panel: a wrongly mapped apartment is shown with its fix and fixed."""

from __future__ import annotations

import re

import pytest

from pmsgate.customers.registry_check import check_and_record, latest_registry_check
from pmsgate.storage.audit import AuditFilter
from tests.customers.test_registry_check import FOUR_APARTMENTS, swap_mapping
from tests.web.support import WebSandbox, post_reconnect, web_sandbox

pytestmark = pytest.mark.anyio

HTMX = {"HX-Request": "true"}


def rows_of(panel: str) -> dict[str, str]:
    """Room type → the problem the panel shows for it ("ok" when mapped right)."""
    return dict(
        re.findall(r'data-testid="registry-apartment" data-room-type="([^"]+)"\s+'
                   r'data-problem="([^"]+)"', panel)
    )  # fmt: skip


async def registry_events(web: WebSandbox) -> list[tuple[str, str, str]]:
    owner = await web.web.audit.owner(web.student_id)
    page = await web.web.audit.page(AuditFilter(owner=owner))
    return [
        (e.action, e.actor, str(e.details.get("operation", "")))
        for e in page.events
        if e.action == "registry.fixed" or e.details.get("operation") == "registry.fix"
    ]


async def test_a_customer_sees_the_wrong_mapping_and_fixes_it_from_the_panel(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, student_index=FOUR_APARTMENTS) as web:
        first, second = await swap_mapping(web.enrolled)
        client, token = await web.signed_in("customer")
        base = f"/console/customers/{web.student_id}/registry"

        checked = await client.post(f"{base}/check", data={"csrf_token": token}, headers=HTMX)
        assert checked.status_code == 200, checked.text
        panel = checked.text
        assert 'data-status="problems"' in panel
        shown = rows_of(panel)
        assert shown[first] == "not_mapped" and shown[second] == "room_type_mismatch"
        assert {rt for rt, problem in shown.items() if problem == "ok"} == set(
            web.enrolled.room_type_ids
        ) - {first, second}
        assert "Listing unavailable" in panel
        # In the customer's words, by apartment name: the fix button's change, not a command.
        assert "button below connects it to the listing" in panel
        assert 'data-testid="registry-fix"' in panel
        names = {str(a["id_room_type"]): a["name"] for a in web.enrolled.facility["apartments"]}
        # Which listing each apartment maps to, by apartment names (no room-type numbers).
        assert f"(set up for {names[first]})" in panel
        assert f"(room type {first})" not in panel
        # A customer never sees the platform's listing ids.
        listing = (
            await web.web.customers.apartments.get(web.student_id, second)
        ).assistant_listing_id
        assert listing is not None and listing not in panel

        fixed = await client.post(f"{base}/fix", data={"csrf_token": token}, headers=HTMX)
        assert fixed.status_code == 200, fixed.text
        assert 'data-testid="registry-fix-result" data-changes="2"' in fixed.text
        assert 'data-status="ok"' in fixed.text
        assert set(rows_of(fixed.text).values()) == {"ok"}
        latest = await latest_registry_check(web.web.customers, web.student_id)
        assert latest is not None and latest.status == "ok"
        events = await registry_events(web)
        email_actor = events[0][1]
        assert sorted(e[0] for e in events) == ["console.action", "registry.fixed"]
        assert all(e[1] == email_actor for e in events)

        # Without JavaScript: the form posts and the answer goes back to the panel.
        again = await client.post(f"{base}/fix", data={"csrf_token": token})
        assert again.status_code == 303
        assert again.headers["location"] == f"/console/customers/{web.student_id}#registry"
        assert [e[0] for e in await registry_events(web)].count("registry.fixed") == 1


async def test_the_actions_need_the_csrf_token_and_the_customers_own_account(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, student_index=FOUR_APARTMENTS) as web:
        await swap_mapping(web.enrolled)
        other = await web.second_customer(0)  # not the enrolled one
        assert other != web.student_id
        client, token = await web.signed_in("customer")
        base = f"/console/customers/{web.student_id}/registry"
        refused = await client.post(f"{base}/fix", data={})
        assert refused.status_code == 403 and 'data-code="csrf_failed"' in refused.text
        foreign = await client.post(
            f"/console/customers/{other}/registry/fix", data={"csrf_token": token}
        )
        assert foreign.status_code == 403 and 'data-code="forbidden"' in foreign.text
        assert await latest_registry_check(web.web.customers, web.student_id) is None
        assert (await check_and_record(web.web.customers, web.student_id)).status == "problems"

        admin, admin_token = await web.signed_in("admin")
        answer = await admin.post(f"{base}/fix", data={"csrf_token": admin_token}, headers=HTMX)
        assert 'data-status="ok"' in answer.text
        listing = (
            await web.web.customers.apartments.get(web.student_id, web.enrolled.room_type_ids[0])
        ).assistant_listing_id
        assert listing is not None and listing in answer.text  # admins see the ids


async def test_a_broken_connection_is_explained_and_nothing_is_detached(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, student_index=FOUR_APARTMENTS) as web:
        await web.enrolled.break_kross()
        client, token = await web.signed_in("customer")
        base = f"/console/customers/{web.student_id}/registry"
        checked = await client.post(f"{base}/check", data={"csrf_token": token}, headers=HTMX)
        assert 'data-status="unchecked"' in checked.text
        assert "the booking system needs reconnecting" in checked.text
        assert 'data-testid="registry-fix"' not in checked.text
        fixed = await client.post(f"{base}/fix", data={"csrf_token": token}, headers=HTMX)
        assert 'data-code="registry_unchecked"' in fixed.text
        rows = (await web.enrolled.context()).apartments
        assert all(a.assistant_listing_id for a in rows)


async def test_a_reconnect_checks_again_so_the_panel_does_not_stay_unchecked(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, student_index=FOUR_APARTMENTS) as web:
        await web.enrolled.break_kross()
        customers = web.web.customers
        assert (await check_and_record(customers, web.student_id)).status == "unchecked"
        client, token = await web.signed_in("customer")
        facility = web.enrolled.facility
        # The password break_kross set.
        answer = await post_reconnect(web, client, token, f"{facility['password']}-changed")
        assert answer.status_code == 303, answer.text
        latest = await latest_registry_check(customers, web.student_id)
        assert latest is not None and latest.status == "ok"


async def test_the_pages_show_the_stored_check_without_a_click(database_url: str) -> None:
    """What the check-registry job stored is on the customer's and the admin's page at once."""
    async with web_sandbox(database_url, student_index=FOUR_APARTMENTS) as web:
        first, second = await swap_mapping(web.enrolled)
        await check_and_record(web.web.customers, web.student_id)  # as the job does
        page_path = f"/console/customers/{web.student_id}"
        for role in ("customer", "admin"):
            client, _ = await web.signed_in(role)
            page = await client.get(page_path)
            assert page.status_code == 200, page.text
            assert 'data-status="problems"' in page.text, role
            shown = rows_of(page.text)
            assert shown[first] == "not_mapped" and shown[second] == "room_type_mismatch"
