"""Direct access to the allowed booking-system operations (``POST /v1/operations/{path}``).

Reads share the read cache and the limiter with the tools, and their date filters
are enforced here. Writes are exactly-once from the caller's point of view:

- every write needs an ``Idempotency-Key``; the key, a hash of the body and the
  answer are stored; a replay returns the stored answer, the same key with another
  body is refused, and a key whose write is still running answers 409;
- a write is sent at most once per key. When its outcome is unknown (sent, then no
  answer), it is **never re-sent blindly**: every write has a read-back
  (:data:`READ_BACKS`, docs/gateway.md "Writes"): a payment carries a reference
  derived from the key in its note; a date change shows its dates; a registered
  guest is listed by name; pictures show in the guest portal, compared with a read
  taken just before sending. When the read-back proves the write missing it is
  sent, when it proves it applied the write is recorded as done, otherwise the
  caller gets ``write_outcome_unknown`` and the same key resolves it later;
- an in-flight record belongs to the process running it (its instance id): a
  record whose owner is known to be gone (:class:`~pmsgate.gateway.locks.Liveness`)
  is settled by read-back at once, not after ``in_flight_timeout_s``;
- while one key's write is in flight or unknown, the same write (facility,
  operation and body) under another key is refused (``write_unresolved``) with the
  first key named: repeating that key settles it without a second send;
- a write the booking system certainly did not apply (refused before sending, no
  budget, 401, 429, 503) releases its key, so the caller may send it again.

``reservations/save`` sends the whole record, as public clients do: the reservation is
read first (``reservations/get-list`` by id, through the gateway's read path and
limiter, never from the cache) and mapped to the save body with the new dates
(``pms.reservation_rows.save_body``). When that read fails nothing is sent, the key
is released and the caller gets a clear error.

Every write is recorded in the audit trail (``key.used_for_write``, docs/audit.md): the
calling key's display prefix, the facility, the operation, the Idempotency-Key and how
it ended — ``success``, ``failure`` with the error code, or ``unknown`` when it may have
been sent and is not settled yet. A replay of a settled key is recorded too, marked
``replayed`` with the stored answer's outcome: nothing is sent, but it shows who asked
again. Reads are not recorded (their volume; they change nothing).

Reads of ``reservations/get-list`` send upstream only the filters public integrations
use; our stay filters are applied here. Guest e-mail addresses and phone numbers are
removed from every row before the answer is cached or returned.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal

import anyio
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.boundary import NOT_BLANK_TEXT_PATTERN, text_pattern
from pmsgate.errors import Conflict, Forbidden, InvalidInput, NotFound, PmsgateError
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.limiter import Priority
from pmsgate.gateway.locks import Liveness, LocalLiveness
from pmsgate.gateway.service import Gateway, body_hash
from pmsgate.gateway.upstream_errors import translate
from pmsgate.gateway.write_records import WriteRecords
from pmsgate.integrations.kross import errors as kross
from pmsgate.integrations.kross.client import TOKEN_OPERATION, KrossResult
from pmsgate.integrations.kross.dates import enforce_reservation_filters
from pmsgate.integrations.kross.models import (
    BIRTH_DATE_YEARS_BACK,
    MAX_PICTURE_BYTES,
    STAY_DATE_YEARS_AHEAD,
    STAY_DATE_YEARS_BACK,
    UPSTREAM_LIST_FILTERS,
    AddPayment,
    AvailabilityQuery,
    ChangeDates,
    GuestPictures,
    RegisterGuest,
    Reservation,
    ReservationQuery,
    RoomTypeQuery,
    WirePayload,
    insane_dates,
)
from pmsgate.integrations.kross.operations import Operation
from pmsgate.integrations.kross.reservation_rows import (
    LIST_REQUEST_FIELDS,
    RecordIncomplete,
    RowUnreadable,
    parse_row,
    save_body,
)
from pmsgate.openapi import schema_of, sometimes
from pmsgate.storage.idempotency import WriteRecord

log = structlog.get_logger(__name__)

PAYLOAD_MODELS: dict[str, type[BaseModel]] = {
    "calendar/get-availability": AvailabilityQuery,
    "reservations/get-list": ReservationQuery,
    "get-check-in-instructions": RoomTypeQuery,
    "get-house-manual": RoomTypeQuery,
    "get-contract": RoomTypeQuery,
    "reservations/save": ChangeDates,
    "reservations/add-payment": AddPayment,
    "check-in-guest": RegisterGuest,
    "save-guest-pictures": GuestPictures,
}
READ_FRESHNESS_S = 60.0
MAX_KEY_LENGTH = 200
# The error of a write that may have been applied: its audit outcome is unknown, not failure.
OUTCOME_UNKNOWN_CODE = "write_outcome_unknown"
LIST_OPERATION = "reservations/get-list"
SAVE_OPERATION = "reservations/save"
# Guest contact data never leaves the gateway in an answer (docs/gateway.md).
CONTACT_FIELDS = frozenset({"email", "phone", "mobile", "telephone", "phone_number"})
# Public filter names (ours) → our names in LIST_REQUEST_FIELDS, renamed by the table.
_LIST_FILTER_NAMES = {
    "id_reservation": "reservation_id",
    "date_reservation_from": "booked_from",
    "date_reservation_to": "booked_to",
    "with_rooms": "with_rooms",
    "limit": "limit",
    "offset": "offset",
}


class OperationReadMeta(BaseModel):
    """Where an operation read's answer came from and how fresh it is."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["upstream", "cache"]
    age_s: float = Field(description="Seconds since the read was made.")
    stale: bool = Field(description="True when this is the last good answer, kept.")
    count: int = Field(ge=0, description="Items in data (1 when data is not a list).")
    dropped_out_of_range: int = Field(
        ge=0, description="Rows outside the stay filters asked (reservations/get-list)."
    )
    ruid: str | None = Field(description="The booking system's request id.")


class OperationReadAnswer(BaseModel):
    """A read operation's answer: the booking system's data, and where it came from."""

    model_config = ConfigDict(extra="forbid")

    data: Any = Field(
        description="The booking system's answer as it sent it (docs/kross-api.md), guests' "
        "e-mail and phone removed."
    )
    meta: OperationReadMeta


class OperationWriteMeta(BaseModel):
    """What a write's answer says about the write."""

    model_config = ConfigDict(extra="forbid")

    idempotency_key: str
    ruid: str | None = sometimes(
        "The booking system's request id; left out when a read-back settled the write."
    )
    recovered: Literal[True] = sometimes(
        "true when the write's answer was lost and a read-back proved it applied; left out "
        "otherwise."
    )


class OperationWriteAnswer(BaseModel):
    """A write's answer (a replay gives the first answer again, Idempotent-Replayed: true)."""

    model_config = ConfigDict(extra="forbid")

    data: Any = Field(
        description="The booking system's answer; after a read-back, what it shows of the write."
    )
    meta: OperationWriteMeta


@dataclass(frozen=True)
class OperationAnswer:
    """An operation's HTTP answer: status, body, and whether it is a stored replay."""

    status: int
    body: dict[str, Any]
    replayed: bool = False


class Operations:
    """Runs allowed operations for a facility: cached reads, exactly-once writes."""

    def __init__(
        self,
        gateway: Gateway,
        records: WriteRecords,
        *,
        liveness: Liveness | None = None,
        in_flight_timeout_s: float = 300.0,
        audit: AuditTrail | None = None,
    ) -> None:
        self.gateway = gateway
        self.records = records
        # Where writes are recorded (key.used_for_write); None records nothing (unit tests).
        self.audit = audit
        # Without a liveness signal this process is the only one (one SQLite deployment).
        self.liveness = liveness or LocalLiveness()
        self.in_flight_timeout = timedelta(seconds=in_flight_timeout_s)

    @property
    def owner(self) -> str:
        """This process's instance id, stored on the records of the writes it runs."""
        return self.liveness.instance_id

    async def call(
        self,
        facility: FacilityView,
        path: str,
        payload: dict[str, Any],
        idempotency_key: str | None,
        *,
        caller: Actor | None = None,
    ) -> OperationAnswer:
        """Run one operation; refused locally when it does not exist or is out of scope.

        ``caller`` is who the audit trail names for a write (the gateway key's display
        prefix); reads record nothing.
        """
        self.gateway.usage.tool_call(facility.hotel_id)
        op = self.gateway.operation(path)
        if op.name == TOKEN_OPERATION:
            raise Forbidden(
                "Tokens are handled by the gateway; auth/get-token cannot be called.",
                code="operation_not_allowed",
                hint="Call the operation you need; the gateway authenticates for you.",
            )
        if op.kind == "read":
            validated = _validate(op.name, payload, self.gateway.clock.now().date())
            return await self._read(facility, op.name, validated)
        return await self._audited_write(facility, op.name, payload, idempotency_key, caller)

    # --- the audit trail of writes ------------------------------------------------------

    async def _audited_write(
        self,
        facility: FacilityView,
        name: str,
        payload: dict[str, Any],
        key: str | None,
        caller: Actor | None,
    ) -> OperationAnswer:
        """A write, recorded in the audit trail however it ends (after its own transactions)."""
        try:
            validated = _validate(name, payload, self.gateway.clock.now().date())
            answer = await self._write(facility, name, validated, key)
        except PmsgateError as error:
            outcome = Outcome.UNKNOWN if error.code == OUTCOME_UNKNOWN_CODE else Outcome.FAILURE
            await self._audit_write(
                facility, name, key, caller, outcome, status=error.status, error_code=error.code
            )
            raise
        except BaseException as error:
            # Cancelled or crashed: the write may have been sent (its record says unknown).
            with anyio.CancelScope(shield=True):
                await self._audit_write(
                    facility,
                    name,
                    key,
                    caller,
                    Outcome.UNKNOWN,
                    status=None,
                    error_code=type(error).__name__,
                )
            raise
        stored_error = answer.body.get("error") if answer.status >= 400 else None
        meta = answer.body.get("meta")
        await self._audit_write(
            facility,
            name,
            key,
            caller,
            Outcome.FAILURE if answer.status >= 400 else Outcome.SUCCESS,
            status=answer.status,
            error_code=stored_error.get("code") if isinstance(stored_error, dict) else None,
            replayed=answer.replayed,
            recovered=isinstance(meta, dict) and meta.get("recovered") is True,
        )
        return answer

    async def refused_write(
        self,
        *,
        key_prefix: str,
        key_hash: str,
        name: str,
        idempotency_key: str | None,
        error: PmsgateError,
    ) -> None:
        """Record a write refused before it started (a key without the write's scope).

        Security-relevant, so recorded (outcome ``refused``) although nothing was sent. The
        refusal came before the key's facility was handed out: it is read here, once.
        """
        if self.audit is None:
            return
        found = await self.audit.facility_of_key(key_hash)
        await self.audit.record(
            AuditAction.KEY_USED_FOR_WRITE,
            actor=Actor.gateway_key(key_prefix),
            subject=f"facility:{found[1]}" if found else f"key:{key_prefix}",
            outcome=Outcome.REFUSED,
            details={
                "operation": name,
                "idempotency_key": idempotency_key,
                "status": error.status,
                "error_code": error.code,
            },
            facility_id=found[0] if found else None,
        )

    async def _audit_write(
        self,
        facility: FacilityView,
        name: str,
        key: str | None,
        caller: Actor | None,
        outcome: Outcome,
        *,
        status: int | None,
        error_code: str | None,
        replayed: bool = False,
        recovered: bool = False,
    ) -> None:
        if self.audit is None:
            return
        details: dict[str, Any] = {"operation": name, "idempotency_key": key, "status": status}
        if error_code is not None:
            details["error_code"] = error_code
        if replayed:
            details["replayed"] = True  # the stored answer again: nothing was sent
        if recovered:
            details["recovered"] = True  # an unknown outcome settled by a read-back
        await self.audit.record(
            AuditAction.KEY_USED_FOR_WRITE,
            actor=caller or Actor.system("gateway"),
            subject=f"facility:{facility.hotel_id}",
            outcome=outcome,
            details=details,
            facility_id=facility.id,
        )

    # --- reads --------------------------------------------------------------------------

    async def _read(
        self, facility: FacilityView, name: str, payload: dict[str, Any]
    ) -> OperationAnswer:
        upstream = payload
        if name == LIST_OPERATION:
            upstream = _upstream_list_body(self.gateway.operation(name), payload)

        async def fetch(priority: Priority) -> dict[str, Any]:
            result = await self.gateway.read(facility, name, upstream, priority=priority)
            data = result.data
            if name == LIST_OPERATION:
                # Removed before caching: the cache never holds what no answer may show.
                data = _without_contacts(data)
            return {"data": data, "ruid": result.ruid, "total_count": result.total_count}

        cached = await self.gateway.cached_read(
            facility, f"op:{name}:{body_hash(upstream)}", max_age_s=READ_FRESHNESS_S, fetch=fetch
        )
        data = cached.value["data"]
        dropped = 0
        if name == LIST_OPERATION and isinstance(data, list):
            kept = enforce_reservation_filters(data, payload)
            data, dropped = kept.items, kept.dropped_out_of_range
        meta = {
            "source": cached.source,
            "age_s": round(cached.age_s, 1),
            "stale": cached.stale,
            "count": len(data) if isinstance(data, list) else 1,
            "dropped_out_of_range": dropped,
            "ruid": cached.value.get("ruid"),
        }
        return OperationAnswer(200, {"data": data, "meta": meta})

    # --- writes -------------------------------------------------------------------------

    async def _write(
        self, facility: FacilityView, name: str, payload: dict[str, Any], key: str | None
    ) -> OperationAnswer:
        key = _check_key(key)
        fingerprint = body_hash({"operation": name, "body": payload})
        now = self.gateway.clock.now()
        record, created = await self.records.claim(
            facility_id=facility.id,
            key=key,
            operation=name,
            body_hash=fingerprint,
            now=now,
            owner=self.owner,
        )
        if not created:
            return await self._existing(facility, record, name, payload, fingerprint)
        await self._refuse_second_key(record)
        return await self._send(facility, record, name, payload)

    async def _refuse_second_key(self, record: WriteRecord) -> None:
        """409 when the same write is unsettled under an earlier key (sent twice otherwise).

        Checked after the claim: of two keys claimed at the same moment, at least one sees
        the other (both may, and both are refused; a repeat then goes through).
        """
        earlier = await self.records.unresolved_twins(record)
        if not earlier:
            return
        await self.records.release(record.id, owner=self.owner)
        first = earlier[0].key
        raise Conflict(
            f"The same {record.operation} request was sent under the Idempotency-Key "
            f"{first!r} and its outcome is not known yet, so it is not sent again under a "
            "new key.",
            code="write_unresolved",
            hint=f"Repeat the request with Idempotency-Key {first!r}: pmsgate settles it "
            "without sending it twice. Once it is settled, a new key sends it again.",
        )

    async def _existing(
        self,
        facility: FacilityView,
        record: WriteRecord,
        name: str,
        payload: dict[str, Any],
        fingerprint: str,
    ) -> OperationAnswer:
        if record.body_hash != fingerprint:
            raise InvalidInput(
                "This Idempotency-Key was already used for a different request.",
                code="idempotency_key_reused",
                hint="Use a new key for a new write; reuse a key only to repeat the same request.",
            )
        if record.state == "done" and record.response is not None:
            return OperationAnswer(record.status_code or 200, record.response, replayed=True)
        if record.state == "in_flight" and not await self._abandoned(record):
            raise Conflict(
                "A write with this Idempotency-Key is still in progress.",
                code="idempotency_key_in_flight",
                hint="Wait for the first request to finish, then repeat it to get its answer "
                "(if the process running it stopped, a repeat settles it within seconds).",
                headers={"Retry-After": "2"},
            )
        # Unknown outcome (or an in-flight record abandoned by a process that is gone).
        claimed = await self.records.take_over(
            record, owner=self.owner, now=self.gateway.clock.now()
        )
        if not claimed:
            raise Conflict(
                "Another request is resolving this write right now.",
                code="idempotency_key_in_flight",
                hint="Repeat the request in a moment to get its answer.",
                headers={"Retry-After": "2"},
            )
        return await self._resolve_unknown(facility, record, name, payload)

    async def _abandoned(self, record: WriteRecord) -> bool:
        """True when an in-flight record's process is gone (or it outlasted the timeout)."""
        if self.gateway.clock.now() - record.updated_at >= self.in_flight_timeout:
            return True
        if record.owner is None or await self.liveness.is_alive(record.owner):
            return False
        log.warning("write_owner_gone", operation=record.operation, owner=record.owner)
        return True

    async def _send(
        self, facility: FacilityView, record: WriteRecord, name: str, payload: dict[str, Any]
    ) -> OperationAnswer:
        op = self.gateway.operation(name)
        wire = _with_reference(name, payload, record.key)
        try:
            if name == SAVE_OPERATION:
                wire = await self._full_record(facility, op, payload)
            record = await self._read_before(facility, record, name, payload)
        except BaseException:
            # Nothing was sent: the key is free for the same request again.
            with anyio.CancelScope(shield=True):
                await self.records.release(record.id, owner=self.owner)
            raise
        try:
            result = await self.gateway.write_once(facility, op, wire)
        except kross.WriteOutcomeUnknown:
            return await self._resolve_unknown(facility, record, name, payload)
        except kross.UpstreamUnavailable as error:
            if error.status in (None, 503):
                await self.records.release(record.id, owner=self.owner)
                raise translate(error) from None
            return await self._resolve_unknown(facility, record, name, payload)
        except kross.InvalidRequest as error:
            # A refusal is the write's final answer: the same key replays it.
            failure = translate(error)
            await self._store(record, failure.status, failure.to_body())
            raise failure from None
        except kross.KrossError as error:
            await self.records.release(record.id, owner=self.owner)
            raise translate(error) from None
        except PmsgateError:
            # Refused before sending (no budget, integration in error): not applied.
            await self.records.release(record.id, owner=self.owner)
            raise
        except BaseException:
            # Cancelled or crashed mid-request: it may have been sent, so never assume otherwise.
            with anyio.CancelScope(shield=True):
                await self._finish_unknown(record)
            raise
        await self._invalidate(facility)
        return await self._store(record, 200, _answer(result, record.key))

    async def _resolve_unknown(
        self, facility: FacilityView, record: WriteRecord, name: str, payload: dict[str, Any]
    ) -> OperationAnswer:
        await self._invalidate(facility)
        read_back = READ_BACKS[name]
        verdict: Verdict = "undecided"
        try:
            reservation = await self._read_reservation(facility, payload["id_reservation"])
        except (PmsgateError, kross.KrossError) as error:
            log.warning("write_read_back_failed", operation=name, error=type(error).__name__)
        else:
            verdict = read_back.verdict(reservation, payload, record.key, record.read_before)
            if verdict == "undecided" and read_back.resend_undecided:
                log.info("write_undecided_resending_duplicate_safe", operation=name)
                verdict = "missing"
        if isinstance(verdict, dict):
            log.info("write_recovered_by_read_back", operation=name, hotel_id=facility.hotel_id)
            body = {"data": verdict, "meta": {"idempotency_key": record.key, "recovered": True}}
            return await self._store(record, 200, body)
        if verdict == "missing":
            log.info("write_missing_after_read_back_sending", operation=name)
            return await self._send(facility, record, name, payload)
        await self._finish_unknown(record)
        raise PmsgateError(
            "The write was sent but no answer came; it may or may not have been applied.",
            code="write_outcome_unknown",
            status=504,
            hint="Do not send it under a new key. Check the reservation, or repeat this request "
            "with the same Idempotency-Key later: pmsgate resolves it without sending it twice.",
        )

    async def _read_before(
        self, facility: FacilityView, record: WriteRecord, name: str, payload: Mapping[str, Any]
    ) -> WriteRecord:
        """For a write whose read-back compares before and after: the read before sending.

        Kept on the record (a process that takes the write over compares with it too). A
        failed read does not stop the write: its read-back then has nothing to compare.
        """
        snapshot = READ_BACKS[name].before
        if snapshot is None:
            return record
        try:
            reservation = await self._read_reservation(facility, payload["id_reservation"])
        except (PmsgateError, kross.KrossError) as error:
            log.warning("write_read_before_failed", operation=name, error=type(error).__name__)
            return replace(record, read_before=None)
        before = snapshot(reservation)
        await self.records.remember_read(record.id, before, owner=self.owner)
        return replace(record, read_before=before)

    async def _read_reservation(
        self, facility: FacilityView, reservation_id: int, *, strict: bool = False
    ) -> Reservation:
        """The reservation as the booking system has it now (never from the cache).

        ``strict``: every field must read (a record sent back must not lose one).
        """
        op = self.gateway.operation(LIST_OPERATION)
        names = {**LIST_REQUEST_FIELDS, **op.request_fields}
        result = await self.gateway.read(
            facility,
            op.name,
            {names["reservation_id"]: reservation_id, names["with_rooms"]: True},
            priority=Priority.INTERACTIVE,
        )
        rows = result.data if isinstance(result.data, list) else []
        # The server may ignore the filter: only the asked reservation counts.
        for row in rows:
            if isinstance(row, dict) and _same_id(row, op, reservation_id):
                reservation, _ = parse_row(row, op.response_fields, lenient=not strict)
                return reservation
        raise kross.InvalidRequest("Reservation not found on read-back.", status=404)

    async def _full_record(
        self, facility: FacilityView, op: Operation, payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The whole reservations/save body: the record read now, with the new dates."""
        reservation_id = payload["id_reservation"]
        try:
            reservation = await self._read_reservation(facility, reservation_id, strict=True)
        except kross.InvalidRequest as error:
            if error.status == 404:
                raise NotFound(
                    f"Reservation {reservation_id} does not exist in this facility.",
                    code="reservation_not_found",
                    hint="Nothing was sent. Check the reservation number.",
                ) from None
            raise _read_first_failed(error) from None
        except RowUnreadable as unreadable:
            log.warning(
                "save_record_unreadable", hotel_id=facility.hotel_id, fields=list(unreadable.fields)
            )
            raise PmsgateError(
                "The reservation could not be read completely, so its dates were not changed.",
                code="reservation_record_unreadable",
                status=502,
                hint="Nothing was sent. Change the dates in the booking system itself.",
            ) from None
        except kross.KrossError as error:
            raise _read_first_failed(error) from None
        try:
            body = save_body(
                reservation,
                dt.date.fromisoformat(payload["arrival"]),
                dt.date.fromisoformat(payload["departure"]),
                op.request_fields,
            )
        except RecordIncomplete as incomplete:
            log.warning(
                "save_record_incomplete", hotel_id=facility.hotel_id, fields=list(incomplete.fields)
            )
            raise PmsgateError(
                "The reservation read from the booking system lacks its rooms, so a save "
                "could not send the whole record; its dates were not changed.",
                code="reservation_record_incomplete",
                status=502,
                hint="Nothing was sent. Change the dates in the booking system itself.",
            ) from None
        return body

    async def _store(
        self, record: WriteRecord, status: int, body: dict[str, Any]
    ) -> OperationAnswer:
        await self._settle(record, "done", status, body)
        return OperationAnswer(status, body)

    async def _finish_unknown(self, record: WriteRecord) -> None:
        # Only while this process still owns it: one taken for dead must not undo a settlement.
        await self._settle(record, "unknown", None, None)

    async def _settle(
        self, record: WriteRecord, state: str, status: int | None, body: dict[str, Any] | None
    ) -> None:
        """Store how the write ended, only while this process still owns its record."""
        await self.records.finish(
            record.id,
            state=state,
            status_code=status,
            response=body,
            now=self.gateway.clock.now(),
            owner=self.owner,
        )

    async def _invalidate(self, facility: FacilityView) -> None:
        # A write may change any reservation read, availability, or portal state.
        await self.gateway.cache.invalidate(f"{facility.hotel_id}:")


# Payloads whose model-level rule compares their dates (order, length of the range): a
# rule JSON Schema cannot state, refused as ``invalid_date_range`` (docs/gateway.md).
_DATE_RANGE_MODELS: tuple[type[BaseModel], ...] = (AvailabilityQuery, ChangeDates)


def _validate(name: str, payload: dict[str, Any], today: dt.date) -> dict[str, Any]:
    """The payload checked against its model, strictly: what its schema states and no more.

    Strict (validated as the JSON it arrived as): an integer is never a boolean, a float or
    a numeric string, a boolean never a number; ``null`` only where the schema says so.
    """
    model = PAYLOAD_MODELS.get(name)
    if model is None:
        return payload
    try:
        parsed = model.model_validate_json(json.dumps(payload), strict=True)
    except ValidationError as error:
        errors = error.errors()
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in errors
        )
        date_rule = issubclass(model, _DATE_RANGE_MODELS) and all(not e["loc"] for e in errors)
        raise InvalidInput(
            f"Invalid body for {name}: {problems}",
            code="invalid_date_range" if date_rule else "invalid_payload",
            hint="See docs/kross-api.md for the fields of each operation.",
        ) from None
    out_of_range = insane_dates(parsed, today)
    if out_of_range:
        raise InvalidInput(
            f"Invalid body for {name}: {'; '.join(out_of_range)}",
            code="invalid_payload",
            hint=f"Dates must lie from {STAY_DATE_YEARS_BACK} years ago to "
            f"{STAY_DATE_YEARS_AHEAD} years ahead of today ({BIRTH_DATE_YEARS_BACK} years "
            "back for a birth date), written YYYY-MM-DD; see docs/gateway.md.",
        )
    if isinstance(parsed, WirePayload):
        return parsed.to_wire()
    return parsed.model_dump(mode="json", exclude_none=True)


# --- what the payload schemas state beyond pydantic's (docs/gateway.md) --------------------

# Text the models strip before checking its length: at least one character that is not space.
_NOT_BLANK = NOT_BLANK_TEXT_PATTERN
# Four base64 characters carry three bytes: the longest text whose bytes fit a picture.
_MAX_PICTURE_BASE64 = MAX_PICTURE_BYTES // 3 * 4
_FIELD_RULES: dict[tuple[str, str], dict[str, Any]] = {
    ("AddPayment", "method"): {"pattern": _NOT_BLANK},
    ("GuestDetails", "first_name"): {"pattern": _NOT_BLANK},
    ("GuestDetails", "last_name"): {"pattern": _NOT_BLANK},
    ("GuestDetails", "document_number"): {"pattern": _NOT_BLANK},
    # A plain name: no path separator, not "." or "..", not blank.
    ("Picture", "filename"): {"pattern": "^(?!\\s*\\.{1,2}\\s*$)" + text_pattern("/\\\\")[1:]},
    ("Picture", "data_base64"): {
        "pattern": "^(?:[A-Za-z0-9+/]{4})*"
        "(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$",
        "maxLength": _MAX_PICTURE_BASE64,
    },
}
# Models that take exactly one of two keys (RoomTypeQuery): stated as a oneOf.
_ONE_OF: dict[str, tuple[str, ...]] = {"RoomTypeQuery": ("id_room_type", "id_reservation")}


def _refine(title: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (of the model or definition ``title``) with the rules pydantic leaves out."""
    properties = schema.get("properties", {})
    for (owner, field), rules in _FIELD_RULES.items():
        if owner == title and field in properties:
            properties[field] = {**properties[field], **rules}
    if title in _ONE_OF:
        # A key given as null counts as left out (the properties are nullable).
        keys = _ONE_OF[title]
        schema["oneOf"] = [
            {
                "required": [key],
                "properties": {
                    other: {"not": {"type": "null"}} if other == key else {"type": "null"}
                    for other in keys
                },
            }
            for key in keys
        ]
    return schema


def payload_schema(name: str) -> dict[str, Any] | None:
    """The JSON Schema of operation ``name``'s body (None: any object), as enforced."""
    model = PAYLOAD_MODELS.get(name)
    return None if model is None else schema_of(model, _refine)


def _upstream_list_body(op: Operation, payload: Mapping[str, Any]) -> dict[str, Any]:
    """What a get-list read sends: the public filters only, under the table's names."""
    names = {**LIST_REQUEST_FIELDS, **op.request_fields}
    body: dict[str, Any] = {}
    for key, value in payload.items():
        if key not in UPSTREAM_LIST_FILTERS:
            continue  # our own stay filters: applied by enforce_reservation_filters
        ours = _LIST_FILTER_NAMES.get(key)
        body[names[ours] if ours else key] = value
    return body


def _without_contacts(data: Any) -> Any:
    """``data`` with guests' e-mail and phone fields removed, at any depth."""
    if isinstance(data, list):
        return [_without_contacts(item) for item in data]
    if isinstance(data, dict):
        return {k: _without_contacts(v) for k, v in data.items() if k not in CONTACT_FIELDS}
    return data


def _same_id(row: Mapping[str, Any], op: Operation, reservation_id: int) -> bool:
    try:
        reservation, _ = parse_row(row, op.response_fields)
    except RowUnreadable:
        return False
    return reservation.id_reservation == reservation_id


def _read_first_failed(error: kross.KrossError) -> PmsgateError:
    """The caller's error when the read before a save failed: nothing was sent."""
    translated = translate(error)
    return PmsgateError(
        "The reservation could not be read before changing its dates, so nothing was sent "
        f"({translated.code}).",
        code="save_read_failed",
        status=503 if error.retryable else 502,
        hint="Nothing was sent; send the same request again (the same Idempotency-Key works).",
        headers=translated.headers,
    )


def _check_key(key: str | None) -> str:
    if not key:
        raise InvalidInput(
            "Writes need an Idempotency-Key header.",
            code="idempotency_key_required",
            status=400,
            hint="Send a unique key per intended write (a UUID), and the same key on a retry.",
        )
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidInput(
            "The Idempotency-Key is not usable.",
            code="invalid_idempotency_key",
            status=400,
            hint=f"Use printable characters, at most {MAX_KEY_LENGTH} of them (a UUID works).",
        )
    return key


def payment_reference(key: str) -> str:
    """The marker put in a payment's note so a read-back can recognise it."""
    return f"[pmsgate:{hashlib.sha256(key.encode()).hexdigest()[:12]}]"


def _with_reference(name: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
    if name != "reservations/add-payment":
        return payload
    note = (payload.get("note") or "").strip()
    return {**payload, "note": f"{note} {payment_reference(key)}".strip()}


def _answer(result: KrossResult, key: str) -> dict[str, Any]:
    return {"data": result.data, "meta": {"ruid": result.ruid, "idempotency_key": key}}


# What a read-back concludes: the write applied (what it shows of it), provably not
# applied ("missing": it is sent), or "undecided" (the read cannot tell).
Verdict = dict[str, Any] | Literal["missing", "undecided"]
ReadBefore = dict[str, Any] | None


@dataclass(frozen=True)
class ReadBack:
    """How a read of the reservation settles one write whose outcome is unknown.

    ``verdict(reservation, payload, key, read_before)`` judges the read; ``before``, when
    set, takes the snapshot read just before sending that ``verdict`` compares with;
    ``resend_undecided`` sends a write again when a successful read cannot tell (only
    for a write whose repetition has no second effect).
    """

    verdict: Callable[[Reservation, Mapping[str, Any], str, ReadBefore], Verdict]
    before: Callable[[Reservation], dict[str, Any]] | None = None
    resend_undecided: bool = False


def _payment_applied(
    reservation: Reservation, payload: Mapping[str, Any], key: str, _: ReadBefore
) -> Verdict:
    if reservation.payments is None:
        return "undecided"  # the row lists no payments: nothing proves either way
    marker = payment_reference(key)
    for payment in reservation.payments:
        if payment.note and marker in payment.note:
            return payment.model_dump(mode="json")
    return "missing"


def _dates_applied(
    reservation: Reservation, payload: Mapping[str, Any], key: str, _: ReadBefore
) -> Verdict:
    if (
        reservation.arrival.isoformat() == payload["arrival"]
        and reservation.departure.isoformat() == payload["departure"]
    ):
        return {
            "id_reservation": reservation.id_reservation,
            "arrival": reservation.arrival.isoformat(),
            "departure": reservation.departure.isoformat(),
        }
    return "missing"


def _same_person(first: str | None, last: str | None, guest: Mapping[str, Any]) -> bool:
    def norm(value: str | None) -> str:
        return " ".join((value or "").split()).casefold()

    return norm(first) == norm(guest["first_name"]) and norm(last) == norm(guest["last_name"])


def _guest_registered(
    reservation: Reservation, payload: Mapping[str, Any], key: str, _: ReadBefore
) -> Verdict:
    """A guest of that name on the reservation proves the registration (one per person)."""
    if "guests" not in reservation.model_fields_set:
        return "undecided"  # the row carries no guest list
    for guest in reservation.guests:
        if _same_person(guest.first_name, guest.last_name, payload["guest"]):
            # The shape of check-in-guest's own answer, without the guest's name.
            return {"id_guest": guest.id_guest, "id_reservation": reservation.id_reservation}
    return "missing"


def _pictures_missing(reservation: Reservation) -> bool | None:
    """Whether the guest portal still asks for pictures; None when the row has no portal block."""
    portal = reservation.guest_portal
    if portal is None or portal.status is None:
        return None
    return "guest_pictures" in portal.missing


def _pictures_before(reservation: Reservation) -> dict[str, Any]:
    return {"pictures_missing": _pictures_missing(reservation)}


def _pictures_saved(
    reservation: Reservation, payload: Mapping[str, Any], key: str, before: ReadBefore
) -> Verdict:
    """The portal asks for pictures: none stored. It asked before and no longer does: stored."""
    missing = _pictures_missing(reservation)
    if missing:
        return "missing"
    if missing is False and before is not None and before.get("pictures_missing") is True:
        return {"id_reservation": reservation.id_reservation, "saved": len(payload["pictures"])}
    return "undecided"


# How each write's unknown outcome is settled (docs/gateway.md "Writes").
READ_BACKS: dict[str, ReadBack] = {
    "reservations/add-payment": ReadBack(_payment_applied),
    "reservations/save": ReadBack(_dates_applied),
    "check-in-guest": ReadBack(_guest_registered),
    # Pictures are not listed by any read; the portal only says whether some are stored.
    # Storing the same files again keeps a copy and changes nothing else, so a read that
    # cannot tell sends them again rather than leaving the write unknown for good.
    "save-guest-pictures": ReadBack(
        _pictures_saved, before=_pictures_before, resend_undecided=True
    ),
}
