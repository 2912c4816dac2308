"""A cached tool call is the answer kept from the last call with the same body, bytes out, as
long as the reads it was made from stand (pmsgate.gateway.rendered); a new version of a read
makes it again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pmsgate.clock import ManualClock
from pmsgate.gateway.rendered import render_json
from tests.e2e.conftest import Gateway

pytestmark = pytest.mark.anyio

TOOL = "get-reservation-status"


def a_reservation(kross_store: Any, hotel_id: str, clock: ManualClock) -> int:
    today = clock.now().date()
    for reservation in kross_store.facility(hotel_id).reservations.values():
        if reservation.arrival > today and reservation.status == "CONF":
            return int(reservation.id_reservation)
    raise AssertionError("the seed has no upcoming confirmed reservation")


async def test_a_hit_is_the_kept_answer_with_its_age_and_a_write_makes_it_again(
    gateway: Gateway, facility: tuple[dict[str, Any], str], kross_store: Any, clock: ManualClock
) -> None:
    record, key = facility
    auth = {"Authorization": f"Bearer {key}"}
    reservation = a_reservation(kross_store, record["hotel_id"], clock)
    body = json.dumps({"reservation_id": reservation}).encode()
    tools = gateway.services.tools

    async def call() -> bytes:
        answer = await gateway.http.post(f"/v1/tools/{TOOL}", content=body, headers=auth)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        return answer.content

    first = json.loads(await call())
    assert first["meta"]["source"] == "upstream"
    assert tools.kept_answers == 1
    clock.advance(7.25)
    kept = await call()
    # The bytes a JSONResponse of the same answer would send; only source and age differ.
    assert kept == render_json(json.loads(kept))
    second = json.loads(kept)
    assert second["data"] == first["data"]
    assert second["meta"] == {**first["meta"], "source": "cache", "age_s": 7.2}
    assert tools.kept_answers == 1
    # A body written otherwise is another answer, made and kept apart (same data).
    spaced = await gateway.http.post(f"/v1/tools/{TOOL}", content=b" " + body, headers=auth)
    assert spaced.json()["data"] == first["data"] and tools.kept_answers == 2

    # A write invalidates the facility's reads: the next answer is made from the new window.
    paid = await gateway.http.post(
        "/v1/operations/reservations/add-payment",
        json={"id_reservation": reservation, "amount": 50, "currency": "EUR", "method": "card"},
        headers={**auth, "Idempotency-Key": "rendered-1"},
    )
    assert paid.status_code == 200, paid.text
    after = json.loads(await call())
    assert after["meta"]["source"] == "upstream"
    before_paid = first["data"]["reservation"]["paid"] or 0
    assert after["data"]["reservation"]["paid"] == pytest.approx(before_paid + 50)
    again = json.loads(await call())
    assert again["meta"]["source"] == "cache" and again["data"] == after["data"]

    # The call log and the metrics see a kept answer as any cached answer.
    calls = gateway.services.gateway.call_log.pending()
    sources = [row.source for row in calls if row.name == TOOL]
    assert sources == ["upstream", "cache", "cache", "upstream", "cache"]
    hits = gateway.services.metrics.registry.get_sample_value(
        "pmsgate_cache_hits_total", {"stale": "false"}
    )
    assert hits is not None and hits >= 3


async def test_an_answer_past_its_refresh_point_is_made_again(
    gateway: Gateway, facility: tuple[dict[str, Any], str], clock: ManualClock
) -> None:
    _, key = facility
    auth = {"Authorization": f"Bearer {key}"}
    tools = gateway.services.tools
    first = await gateway.http.post("/v1/tools/get-in-house-guests", json={}, headers=auth)
    assert first.json()["meta"]["source"] == "upstream"
    max_age = tools.max_age_s("get-in-house-guests")
    ratio = gateway.services.gateway.policy.refresh_ahead_ratio
    clock.advance(ratio * max_age + 1)  # due for a background refresh, still fresh
    due = await gateway.http.post("/v1/tools/get-in-house-guests", json={}, headers=auth)
    assert due.json()["meta"]["source"] == "cache"
    assert due.json()["meta"]["age_s"] == pytest.approx(ratio * max_age + 1, abs=0.1)
    assert due.json()["data"] == first.json()["data"]
