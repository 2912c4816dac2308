"""A write by a customer's facility key shows on that customer's audit page, and nobody else's.

Through HTTP on the enrolled sandbox: the gateway route pays with a write-scoped key of the
customer's facility, then each customer's user reads ``/console/audit`` and its export.
"""

from __future__ import annotations

import json

import pytest

from pmsgate.gateway.keys import display_prefix
from pmsgate.gateway.scopes import write_scope
from tests.support.payments import PAYMENT, payment_body
from tests.web.support import login, web_sandbox

pytestmark = pytest.mark.anyio


async def test_a_write_by_the_facility_key_is_the_customers_own_event_only(
    database_url: str,
) -> None:
    async with web_sandbox(database_url) as web:
        other = await web.second_customer()
        _, raw = await web.gateway.facilities.mint_key(
            web.hotel_id, "payments", scopes=[write_scope(PAYMENT)]
        )
        today = web.enrolled.clock.now().date()
        paid = await web.client.post(
            f"/v1/operations/{PAYMENT}",
            json=payment_body(web.enrolled.sandbox.kross, web.hotel_id, today, 25),
            headers={"Authorization": f"Bearer {raw}", "Idempotency-Key": "console-pay-1"},
        )
        assert paid.status_code == 200, paid.text

        mine, _ = await web.signed_in("customer")
        email, password = await web.add_user("customer", student_id=other)
        theirs = await web.new_client()
        await login(theirs, email, password)
        own_page = await mine.get("/console/audit", params={"action": "key."})
        own_export = await mine.get("/console/audit/export.jsonl")
        their_export = await theirs.get("/console/audit/export.jsonl")
        their_page = await theirs.get("/console/audit", params={"action": "key."})

    assert own_page.status_code == 200 and "key.used_for_write" in own_page.text
    writes = [
        event
        for event in map(json.loads, own_export.text.splitlines())
        if event["action"] == "key.used_for_write"
    ]
    assert len(writes) == 1
    assert writes[0]["actor"] == display_prefix(raw)
    assert writes[0]["details"]["idempotency_key"] == "console-pay-1"
    assert writes[0]["outcome"] == "success"
    assert raw not in own_export.text
    their_actions = {json.loads(line)["action"] for line in their_export.text.splitlines()}
    assert "key.used_for_write" not in their_actions
    assert "key.used_for_write" not in their_page.text and "console-pay-1" not in their_page.text
