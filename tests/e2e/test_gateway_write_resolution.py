"""Every write resolves: read-backs of guests and pictures, owners that died, second keys.

docs/gateway.md "Writes". A write "commits then times out" (the emulator applies it and
the answer is lost) or is "lost then times out" (never applied, no answer); either way
repeating the same Idempotency-Key must settle it to exactly one effect upstream.
"""

from __future__ import annotations

import base64
import datetime as dt
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.operations import _validate
from pmsgate.gateway.service import body_hash
from pmsgate.gateway.write_records import WriteRecords
from pmsgate.sandbox.kross.store import NewGuest, PictureUpload
from pmsgate.storage.db import session_factory
from tests.e2e.conftest import add_seeded_facility, gateway_settings, running_gateway
from tests.support.answers import assert_error

pytestmark = pytest.mark.anyio

GUEST = {
    "first_name": "Ada",
    "last_name": "Lovelace",
    "birth_date": "1990-01-01",
    "nationality": "GB",
    "document_type": "passport",
    "document_number": "P1234567",
}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 64).decode()


async def operation(gateway, key: str, path: str, body: dict[str, Any], idem: str):
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": idem}
    return await gateway.http.post(f"/v1/operations/{path}", json=body, headers=headers)


def a_reservation(kross_store, hotel_id: str, clock):
    """An upcoming confirmed reservation with no guest and no picture yet."""
    today = clock.now().date()
    for reservation in kross_store.facility(hotel_id).reservations.values():
        if (
            reservation.arrival > today
            and reservation.status == "CONF"
            and not reservation.guests
            and not reservation.pictures
        ):
            return reservation
    raise AssertionError("the seed has no upcoming reservation without guests and pictures")


def check_in(reservation) -> dict[str, Any]:
    return {"id_reservation": reservation.id_reservation, "guest": GUEST}


def pictures(reservation) -> dict[str, Any]:
    files = [
        {"filename": f"passport-{n}.png", "content_type": "image/png", "data_base64": PNG}
        for n in (1, 2)
    ]
    return {"id_reservation": reservation.id_reservation, "pictures": files}


def sent(kross_store, name: str) -> int:
    return kross_store.stats.requests_by_operation[name]


@dataclass
class Writer:
    """The facility's key and an upcoming reservation without guests or pictures."""

    gateway: Any
    key: str
    hotel_id: str
    reservation: Any

    async def check_in(self, idem: str):
        """The guest registration of the reservation under the Idempotency-Key ``idem``."""
        body = check_in(self.reservation)
        return await operation(self.gateway, self.key, "check-in-guest", body, idem)

    async def pictures(self, idem: str):
        """The two pictures of the reservation under the Idempotency-Key ``idem``."""
        body = pictures(self.reservation)
        return await operation(self.gateway, self.key, "save-guest-pictures", body, idem)


@pytest.fixture
def writer(gateway, facility, kross_store, clock) -> Writer:
    record, key = facility
    hotel_id = record["hotel_id"]
    return Writer(gateway, key, hotel_id, a_reservation(kross_store, hotel_id, clock))


# --- check-in-guest --------------------------------------------------------------------------


async def test_a_registration_committed_then_timed_out_resolves_to_one_guest(
    gateway, writer, kross_store, clock
):
    reservation = writer.reservation
    # Two requests a minute: the login and the write. The read-back finds no budget.
    await gateway.services.facilities.set_limits(
        writer.hotel_id, Limits(per_minute=2, per_hour=300, per_day=5000)
    )
    kross_store.set_faults(commit_then_timeout=1, timeout_mode="disconnect")

    first = await writer.check_in("in-1")
    again = await writer.check_in("in-1")
    assert first.status_code == again.status_code == 504
    assert again.json()["error"]["code"] == "write_outcome_unknown"

    clock.advance(61)  # the read-back can be afforded again
    settled = await writer.check_in("in-1")
    replay = await writer.check_in("in-1")

    assert settled.status_code == 200, settled.text
    assert settled.json()["meta"]["recovered"] is True
    assert settled.json()["data"] == {
        "id_guest": reservation.guests[0].id_guest,
        "id_reservation": reservation.id_reservation,
    }
    assert replay.json() == settled.json()
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert [g.last_name for g in reservation.guests] == ["Lovelace"]
    assert sent(kross_store, "check-in-guest") == 1


async def test_a_registration_lost_before_it_applied_is_sent_exactly_once_more(writer, kross_store):
    kross_store.set_faults(lost_then_timeout=1, timeout_mode="disconnect")

    answer = await writer.check_in("in-2")
    replay = await writer.check_in("in-2")

    assert answer.status_code == 200, answer.text
    assert "recovered" not in answer.json()["meta"]
    assert replay.json() == answer.json()
    assert kross_store.stats.lost_then_timeout_fired == 1
    assert [g.last_name for g in writer.reservation.guests] == ["Lovelace"]
    assert sent(kross_store, "check-in-guest") == 2  # the lost one, and the one that applied


# --- save-guest-pictures -----------------------------------------------------------------------


async def test_pictures_committed_then_timed_out_are_stored_once(writer, kross_store):
    kross_store.set_faults(commit_then_timeout=1, timeout_mode="disconnect")

    answer = await writer.pictures("pic-1")
    replay = await writer.pictures("pic-1")

    assert answer.status_code == 200, answer.text
    assert answer.json()["meta"]["recovered"] is True
    assert answer.json()["data"]["saved"] == 2
    assert replay.json() == answer.json()
    assert len(writer.reservation.pictures) == 2
    assert sent(kross_store, "save-guest-pictures") == 1


async def test_pictures_lost_before_they_applied_are_sent_exactly_once_more(writer, kross_store):
    kross_store.set_faults(lost_then_timeout=1, timeout_mode="disconnect")

    answer = await writer.pictures("pic-2")

    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["saved"] == 2
    assert len(writer.reservation.pictures) == 2
    assert sent(kross_store, "save-guest-pictures") == 2


async def test_pictures_the_portal_cannot_tell_apart_are_sent_again_as_documented(
    writer, kross_store
):
    # The reservation already has pictures: the portal says "stored" before and after, so
    # nothing can prove the new ones missing; pictures are the one write sent again then.
    reservation = writer.reservation
    upload = PictureUpload("earlier.png", "image/png", b"\x89PNG earlier")
    kross_store.save_pictures(writer.hotel_id, reservation.id_reservation, [upload])
    kross_store.set_faults(commit_then_timeout=1, timeout_mode="disconnect")

    answer = await writer.pictures("pic-3")

    assert answer.status_code == 200, answer.text
    assert sent(kross_store, "save-guest-pictures") == 2
    assert [p.filename for p in reservation.pictures] == [
        "earlier.png",
        *["passport-1.png", "passport-2.png"] * 2,
    ]


# --- a second key for the same unresolved write -------------------------------------------------


async def test_a_second_key_for_an_unresolved_payment_is_refused_until_the_first_settles(
    gateway, facility, kross_store, clock
):
    record, key = facility
    reservation = a_reservation(kross_store, record["hotel_id"], clock)
    payments_before = len(reservation.payments)
    await gateway.services.facilities.set_limits(
        record["hotel_id"], Limits(per_minute=2, per_hour=300, per_day=5000)
    )
    kross_store.set_faults(commit_then_timeout=1, timeout_mode="disconnect")
    body = {"id_reservation": reservation.id_reservation, "amount": 80, "currency": "EUR"}
    body["method"] = "card"

    unknown = await operation(gateway, key, "reservations/add-payment", body, "pay-a")
    assert unknown.json()["error"]["code"] == "write_outcome_unknown"
    refused = await operation(gateway, key, "reservations/add-payment", body, "pay-b")
    other = await operation(gateway, key, "reservations/add-payment", {**body, "amount": 5}, "c")

    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "write_unresolved"
    assert "'pay-a'" in error["hint"]
    assert "Retry-After" not in refused.headers  # retrying the new key is not the way
    assert other.json()["error"]["code"] != "write_unresolved"  # another write is not blocked
    assert sent(kross_store, "reservations/add-payment") == 1

    clock.advance(61)
    settled = await operation(gateway, key, "reservations/add-payment", body, "pay-a")
    assert settled.json()["meta"]["recovered"] is True
    # Settled: the same payment again under a new key is a conscious second payment.
    second = await operation(gateway, key, "reservations/add-payment", body, "pay-b")
    assert second.status_code == 200, second.text
    assert len(reservation.payments) == payments_before + 2


# --- an owner that is gone ------------------------------------------------------------------


async def in_flight(gateway, api_key: str, key: str, body, owner: str) -> None:
    """The record a check-in in flight in process ``owner`` leaves in the database."""
    facility = await gateway.services.facilities.authenticate(api_key)
    payload = _validate("check-in-guest", body, gateway.services.clock.now().date())
    records = WriteRecords(session_factory(gateway.services.engine))
    await records.claim(
        facility_id=facility.id,
        key=key,
        operation="check-in-guest",
        body_hash=body_hash({"operation": "check-in-guest", "body": payload}),
        now=gateway.services.clock.now(),
        owner=owner,
    )


async def test_a_write_left_in_flight_by_a_process_that_ended_is_settled_at_once(
    gateway, facility, kross_store, clock
):
    # No Redis: a record owned by another process is from one that has ended. With Redis:
    # that process's liveness key is gone.
    record, key = facility
    applied = a_reservation(kross_store, record["hotel_id"], clock)
    await in_flight(gateway, key, "dead-1", check_in(applied), owner="a-process-that-ended")
    # That process had registered the guest before it died; nothing has timed out yet.
    guest = NewGuest(**{**GUEST, "birth_date": dt.date(1990, 1, 1)})
    kross_store.register_guest(record["hotel_id"], applied.id_reservation, guest)

    answer = await operation(gateway, key, "check-in-guest", check_in(applied), "dead-1")

    assert answer.status_code == 200, answer.text
    assert answer.json()["meta"]["recovered"] is True
    assert len(applied.guests) == 1
    assert sent(kross_store, "check-in-guest") == 0


async def test_a_write_in_flight_in_this_process_blocks_its_key_and_a_second_key(
    gateway, writer, kross_store
):
    payload = check_in(writer.reservation)
    await in_flight(gateway, writer.key, "mine", payload, owner=gateway.services.operations.owner)

    answer = await writer.check_in("mine")
    other_key = await writer.check_in("another")

    assert_error(answer, 409, "idempotency_key_in_flight")
    assert_error(other_key, 409, "write_unresolved")
    assert "'mine'" in other_key.json()["error"]["hint"]
    assert sent(kross_store, "check-in-guest") == 0


@pytest.fixture
async def replicas(backend, kross_http, clock):
    """Two gateways on one PostgreSQL and one Redis (each its own process, in effect)."""
    settings = gateway_settings(**backend)
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(running_gateway(settings, kross_http, clock))
            for _ in range(2)
        ]


# Replicas share PostgreSQL and Redis: this test has no SQLite variant (never a skip).
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_replica_that_dies_mid_write_frees_its_key_at_once(replicas, kross_store, clock):
    first, second = replicas
    record, key = await add_seeded_facility(first.services, kross_store)
    reservation = a_reservation(kross_store, record["hotel_id"], clock)
    body = check_in(reservation)
    kross_store.set_faults(commit_then_timeout=1, timeout_mode="hang", hang_s=600)

    async with anyio.create_task_group() as group:
        group.start_soon(operation, first, key, "check-in-guest", body, "replica-1")
        with anyio.fail_after(10):
            while kross_store.stats.commit_then_timeout_fired == 0:
                await anyio.wait_all_tasks_blocked()
        # The first replica holds the write (committed upstream, no answer yet).
        busy = await operation(second, key, "check-in-guest", body, "replica-1")
        assert busy.json()["error"]["code"] == "idempotency_key_in_flight"

        await first.services.operations.liveness.aclose()  # it dies: its liveness stops
        settled = await operation(second, key, "check-in-guest", body, "replica-1")
        group.cancel_scope.cancel()  # the dead replica's request never comes back

    assert settled.status_code == 200, settled.text
    assert settled.json()["meta"]["recovered"] is True
    assert len(reservation.guests) == 1
    assert sent(kross_store, "check-in-guest") == 1
    # The first replica's late bookkeeping did not undo the settlement.
    replay = await operation(second, key, "check-in-guest", body, "replica-1")
    assert replay.json() == settled.json()
    assert replay.headers["Idempotent-Replayed"] == "true"
