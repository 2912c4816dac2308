"""/v1/operations: refusals, cached reads with enforced dates, exactly-once writes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pmsgate.gateway.operations import payment_reference
from tests.support.answers import assert_error

pytestmark = pytest.mark.anyio


async def operation(gateway, key: str, path: str, body: dict[str, Any], idem: str | None = None):
    headers = {"Authorization": f"Bearer {key}"}
    if idem is not None:
        headers["Idempotency-Key"] = idem
    return await gateway.http.post(f"/v1/operations/{path}", json=body, headers=headers)


def a_reservation(kross_store, hotel_id: str, clock) -> int:
    today = clock.now().date()
    for reservation in kross_store.facility(hotel_id).reservations.values():
        if reservation.arrival > today and reservation.status == "CONF":
            return int(reservation.id_reservation)
    raise AssertionError("the seed has no upcoming confirmed reservation")


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("calendar/get-calendar", 404, "unknown_operation"),
        ("reservations/change-channel", 404, "unknown_operation"),
        ("channel/save-cm", 403, "operation_out_of_scope"),
        ("messaging/send-message", 403, "operation_out_of_scope"),
        ("users/list", 403, "operation_out_of_scope"),
        ("apiv5", 404, "unknown_operation"),
        ("auth/get-token", 403, "operation_not_allowed"),
    ],
)
async def test_operations_that_must_not_be_sent_are_refused_locally(
    gateway, facility, kross_store, path, status, code
):
    _, key = facility
    before = kross_store.stats.requests_total
    answer = await operation(gateway, key, path, {})
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code
    assert kross_store.stats.requests_total == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("reservations/get-list", {"arrival_from": "0001-01-01"}),
        ("calendar/get-availability", {"date_from": "9999-01-01", "date_to": "9999-01-02"}),
        (
            "reservations/save",
            {"id_reservation": 1, "arrival": "0001-01-01", "departure": "0001-01-02"},
        ),
        (
            "reservations/add-payment",
            {
                "id_reservation": 1,
                "amount": 10,
                "currency": "EUR",
                "method": "cash",
                "date": "9999-12-31",
            },
        ),
    ],
)
async def test_absurd_dates_are_refused_with_a_422_before_anything_is_sent(
    gateway, facility, kross_store, path, body
):
    _, key = facility
    before = kross_store.stats.requests_total
    answer = await operation(gateway, key, path, body, idem="absurd-date-1")
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_payload" and "years" in error["hint"]
    assert kross_store.stats.requests_total == before


async def test_a_birth_date_in_the_future_is_refused_naming_the_nested_field(
    gateway, facility, clock
):
    _, key = facility
    guest = {
        "first_name": "Ada",
        "last_name": "Rossi",
        "nationality": "IT",
        "document_type": "passport",
        "document_number": "X1",
    }
    tomorrow = clock.now().date() + dt.timedelta(days=1)
    future = await operation(
        gateway,
        key,
        "check-in-guest",
        {"id_reservation": 1, "guest": {**guest, "birth_date": tomorrow.isoformat()}},
        idem="birth-1",
    )
    assert future.status_code == 422
    assert "guest.birth_date" in future.json()["error"]["message"]


async def test_a_read_operation_enforces_date_filters_the_server_ignores(gateway, facility, clock):
    _, key = facility
    today = clock.now().date()
    body = {
        "arrival_from": today.isoformat(),
        "arrival_to": (today + dt.timedelta(days=3)).isoformat(),
    }
    answer = await operation(gateway, key, "reservations/get-list", body)
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    assert payload["meta"]["dropped_out_of_range"] > 0
    for row in payload["data"]:
        assert body["arrival_from"] <= row["arrival"] <= body["arrival_to"]


async def test_a_write_without_an_idempotency_key_is_refused(gateway, facility, kross_store, clock):
    record, key = facility
    reservation = a_reservation(kross_store, record["hotel_id"], clock)
    body = {"id_reservation": reservation, "amount": 50, "currency": "EUR", "method": "card"}
    answer = await operation(gateway, key, "reservations/add-payment", body)
    assert_error(answer, 400, "idempotency_key_required")


async def test_a_replayed_payment_is_answered_from_the_record_and_sent_once(
    gateway, facility, kross_store, clock
):
    record, key = facility
    reservation = a_reservation(kross_store, record["hotel_id"], clock)
    body = {"id_reservation": reservation, "amount": 50, "currency": "EUR", "method": "card"}
    first = await operation(gateway, key, "reservations/add-payment", body, idem="pay-1")
    second = await operation(gateway, key, "reservations/add-payment", body, idem="pay-1")
    assert first.status_code == second.status_code == 200, first.text
    assert second.json() == first.json()
    assert second.headers["Idempotent-Replayed"] == "true"
    assert kross_store.stats.requests_by_operation["reservations/add-payment"] == 1


async def test_the_same_key_with_another_body_is_refused(gateway, facility, kross_store, clock):
    record, key = facility
    reservation = a_reservation(kross_store, record["hotel_id"], clock)
    body = {"id_reservation": reservation, "amount": 50, "currency": "EUR", "method": "card"}
    await operation(gateway, key, "reservations/add-payment", body, idem="pay-2")
    other = await operation(
        gateway, key, "reservations/add-payment", {**body, "amount": 70}, idem="pay-2"
    )
    assert_error(other, 422, "idempotency_key_reused")


async def test_a_payment_that_commits_then_times_out_is_recorded_exactly_once(
    gateway, facility, kross_store, clock
):
    record, key = facility
    reservation = a_reservation(kross_store, record["hotel_id"], clock)
    payments_before = len(
        kross_store.facility(record["hotel_id"]).reservations[reservation].payments
    )
    kross_store.set_faults(commit_then_timeout=1, timeout_mode="disconnect")
    body = {"id_reservation": reservation, "amount": 80, "currency": "EUR", "method": "card"}

    answer = await operation(gateway, key, "reservations/add-payment", body, idem="pay-3")
    again = await operation(gateway, key, "reservations/add-payment", body, idem="pay-3")

    assert answer.status_code == 200, answer.text
    assert answer.json()["meta"]["recovered"] is True
    assert again.json() == answer.json()
    payments = kross_store.facility(record["hotel_id"]).reservations[reservation].payments
    assert len(payments) == payments_before + 1
    assert payment_reference("pay-3") in payments[-1].note
    assert kross_store.stats.requests_by_operation["reservations/add-payment"] == 1


async def test_a_write_invalidates_the_cached_reservation_window(
    gateway, facility, kross_store, clock
):
    record, key = facility
    reservation = a_reservation(kross_store, record["hotel_id"], clock)
    status = await gateway.tool("get-reservation-status", key, reservation_id=reservation)
    paid_before = status.json()["data"]["reservation"]["paid"]
    body = {"id_reservation": reservation, "amount": 25, "currency": "EUR", "method": "cash"}
    await operation(gateway, key, "reservations/add-payment", body, idem="pay-4")
    after = await gateway.tool("get-reservation-status", key, reservation_id=reservation)
    assert after.json()["meta"]["source"] == "upstream"
    assert after.json()["data"]["reservation"]["paid"] == pytest.approx(paid_before + 25)


async def test_an_invalid_write_body_is_a_422_and_nothing_is_recorded(gateway, facility):
    _, key = facility
    answer = await operation(
        gateway, key, "reservations/add-payment", {"id_reservation": 1, "amount": -5}, idem="bad"
    )
    assert_error(answer, 422, "invalid_payload")
    assert await gateway.services.operations.records.all_rows() == []
