"""The audit trail as a service: record an event, read the trail, export it, purge old events.

Two ways to record, because events must survive what they describe:

- :meth:`AuditTrail.record` writes the event in its own short transaction. Use it after
  an operation (or its failure): a failed or refused operation still leaves its event,
  because nothing of the caller's rolls it back. A database that cannot take the event
  is logged (``audit_event_lost``) and does not turn an operation that already happened
  into an error. Call it outside any open write transaction of your own (after it
  committed or rolled back): SQLite has one writer, and the event would wait for yours.
- :meth:`AuditTrail.record_in` adds the event to the caller's unit of work: the change
  and its event commit or roll back together (a key minted, credentials stored).

An event never holds a secret. The details are checked: a key that looks like a secret
(password, token, api key, secret, authorization, cookie, …) is a programming error
(:class:`AuditDetailsError`, raised before anything is written); values are scrubbed
(bearer and basic credentials, raw gateway keys, JWTs) and bounded (length, depth, size).
The request id and the client address of the HTTP request being served are picked up
from :mod:`pmsgate.request_context`; CLI commands and jobs have none.

An ``observer`` (the gateway's metrics: ``pmsgate_audit_events``) is told of each event
that lands, by action and outcome: after its own transaction for :meth:`AuditTrail.record`,
when the caller's unit of work commits for :meth:`AuditTrail.record_in` (nothing when it
rolls back). The audit layer does not import the gateway: it only calls what it is given.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import Enum
from typing import Any, Required, TypedDict, Unpack

import structlog
from sqlalchemy import event as sa_event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.clock import Clock
from pmsgate.logs import REDACTED
from pmsgate.request_context import current_client_address, current_request_id
from pmsgate.storage.audit import (
    ActorSeen,
    AuditEventView,
    AuditFilter,
    AuditPage,
    AuditRepository,
    Owner,
)
from pmsgate.storage.facilities import GatewayKeyRepository

log = structlog.get_logger(__name__)

MAX_SUBJECT = 200
MAX_TEXT = 300
MAX_DEPTH = 4
MAX_ITEMS = 50
MAX_KEY = 64
EXPORT_PAGE = 500

# A details key naming a secret: refused, never stored (not even redacted: the caller is wrong).
SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?$|password|passwd|token|api[_-]?key|apikey|secret|"
    r"authori[sz]ation|cookie|private[_-]?key|session[_-]?id|credential",
    re.IGNORECASE,
)
_SCRUBBED = (
    (re.compile(r"((?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE), r"\1" + REDACTED),
    # A raw gateway key: only its display prefix (what `facilities keys` shows) is kept.
    (re.compile(r"(pgw_[A-Za-z0-9_-]{8})[A-Za-z0-9_-]{8,}"), r"\1…"),
    (re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"), REDACTED),
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# Told of every event recorded: its action and its outcome.
AuditObserver = Callable[[str, str], None]
# Where a session holds the events added by record_in until its transaction ends.
_PENDING = "pmsgate_audit_pending"


class AuditDetailsError(ValueError):
    """An event's details hold what an event must not (a secret's key, an unknown type).

    A programming error: the code that records the event is wrong, not its caller.
    """


def clean_text(value: str, limit: int = MAX_TEXT) -> str:
    """``value`` without control characters or credentials, cut to ``limit`` characters."""
    text = _CONTROL.sub(" ", value)
    for pattern, replacement in _SCRUBBED:
        text = pattern.sub(replacement, text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def check_details(details: Mapping[str, Any] | None) -> dict[str, Any]:
    """The details as stored: secret-looking keys refused, values scrubbed and bounded."""
    if not details:
        return {}
    cleaned = _clean(dict(details), depth=0, path="details")
    assert isinstance(cleaned, dict)
    return cleaned


def _clean(value: Any, *, depth: int, path: str) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Enum):
        return _clean(value.value, depth=depth, path=path)
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if depth >= MAX_DEPTH:
        raise AuditDetailsError(f"{path} nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        if len(value) > MAX_ITEMS:
            raise AuditDetailsError(f"{path} has more than {MAX_ITEMS} keys")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str) or not key or len(key) > MAX_KEY:
                raise AuditDetailsError(f"{path} has a key that is not a short string")
            if SECRET_KEY.search(key):
                raise AuditDetailsError(
                    f"{path}.{key} looks like a secret: an audit event never holds one"
                )
            out[key] = _clean(item, depth=depth + 1, path=f"{path}.{key}")
        return out
    if isinstance(value, list | tuple):
        items = [_clean(item, depth=depth + 1, path=f"{path}[]") for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"… {len(value) - MAX_ITEMS} more")
        return items
    raise AuditDetailsError(f"{path} is a {type(value).__name__}, not a JSON value")


def fit_details(value: Mapping[str, Any], *, depth: int = 0) -> dict[str, Any]:
    """Details taken from elsewhere (a step's evidence) made to fit an event, never refused.

    :func:`check_details` refuses what code wrote wrongly; evidence written for another
    purpose is not wrong, it is only not the trail's: a key that looks like a secret is
    left out (its name listed under ``withheld``), keys beyond :data:`MAX_ITEMS` and
    levels beyond :data:`MAX_DEPTH` are summarised, and any other value becomes text.
    """
    out: dict[str, Any] = {}
    withheld: list[str] = []
    for index, (key, item) in enumerate(value.items()):
        name = str(key)[:MAX_KEY] or "-"
        if SECRET_KEY.search(name):
            withheld.append(name)
            continue
        if index >= MAX_ITEMS - 2:
            out["more"] = f"… {len(value) - index} more"
            break
        out[name] = _fit(item, depth=depth + 1)
    if withheld:
        out["withheld"] = withheld[:MAX_ITEMS]
    return out


def _fit(value: Any, *, depth: int) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Enum):
        return _fit(value.value, depth=depth)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        if depth >= MAX_DEPTH - 1:
            return f"{{… {len(value)} keys}}"
        return fit_details(value, depth=depth)
    if isinstance(value, list | tuple | set | frozenset):
        if depth >= MAX_DEPTH - 1:
            return f"[… {len(value)} items]"
        return [_fit(item, depth=depth + 1) for item in list(value)[:MAX_ITEMS]]
    return str(value)


class EventFacts(TypedDict, total=False):
    """What :meth:`AuditTrail.record` and :meth:`AuditTrail.record_in` are told of an event,
    besides its action: who did it to what (required), how it ended (success unless said),
    its details, and the customer and facility it concerns (by row id, or by ``student_id``
    / ``hotel_id`` when the ids are not at hand)."""

    actor: Required[Actor]
    subject: Required[str]
    outcome: Outcome
    details: Mapping[str, Any] | None
    customer_id: int | None
    facility_id: int | None
    student_id: str | None
    hotel_id: str | None
    client_address: str | None


@dataclass(frozen=True)
class _Event:
    """An event checked and ready to append (built before any database work)."""

    action: str
    actor: Actor
    subject: str
    outcome: str
    details: dict[str, Any]
    request_id: str | None
    client_address: str | None


class AuditTrail:
    """Records security-relevant events and reads them back (``container.audit``)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        *,
        retention_days: int,
        observer: AuditObserver | None = None,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self.retention = timedelta(days=retention_days)
        self.observer = observer

    # --- recording ------------------------------------------------------------------------

    def _event(self, action: AuditAction, facts: EventFacts) -> _Event:
        if not isinstance(action, AuditAction):
            raise AuditDetailsError(f"{action!r} is not an AuditAction")
        client_address = facts.get("client_address")
        return _Event(
            action=action.value,
            actor=facts["actor"],
            subject=clean_text(facts["subject"], MAX_SUBJECT) or "-",
            outcome=Outcome(facts.get("outcome", Outcome.SUCCESS)).value,
            details=check_details(facts.get("details")),
            request_id=current_request_id(),
            client_address=(client_address or current_client_address() or None),
        )

    async def _append(
        self, session: AsyncSession, event: _Event, facts: EventFacts
    ) -> AuditEventView:
        repository = AuditRepository(session)
        customer_id, facility_id = facts.get("customer_id"), facts.get("facility_id")
        student_id, hotel_id = facts.get("student_id"), facts.get("hotel_id")
        if customer_id is None and student_id is not None:
            customer_id = await repository.customer_id(student_id)
        if facility_id is None and hotel_id is not None:
            facility_id = await repository.facility_id(hotel_id)
        return await repository.append(
            occurred_at=self._clock.now(),
            actor_kind=event.actor.kind,
            actor=clean_text(event.actor.name, 200),
            action=event.action,
            subject=event.subject,
            outcome=event.outcome,
            customer_id=customer_id,
            facility_id=facility_id,
            request_id=event.request_id,
            client_address=(event.client_address or "")[:64] or None,
            details=event.details,
        )

    async def record(
        self, action: AuditAction, **facts: Unpack[EventFacts]
    ) -> AuditEventView | None:
        """Record one event in its own transaction; None when the database could not take it.

        ``student_id`` / ``hotel_id`` name the customer / facility when their row ids are
        not at hand (looked up in the same transaction).
        """
        event = self._event(action, facts)
        try:
            async with self._sessions.begin() as session:
                view = await self._append(session, event, facts)
        except (SQLAlchemyError, OSError) as error:
            log.error(
                "audit_event_lost",
                action=event.action,
                subject=event.subject,
                outcome=event.outcome,
                error=type(error).__name__,
            )
            return None
        if self.observer is not None:
            self.observer(event.action, event.outcome)
        return view

    async def record_in(
        self, session: AsyncSession, action: AuditAction, **facts: Unpack[EventFacts]
    ) -> AuditEventView:
        """Add one event to the caller's unit of work (it commits or rolls back with it)."""
        event = self._event(action, facts)
        view = await self._append(session, event, facts)
        if self.observer is not None:
            _observe_on_commit(session.sync_session, self.observer, event)
        return view

    async def facility_of_key(self, key_hash: str) -> tuple[int, str] | None:
        """The facility (row id, hotel_id) of the unrevoked gateway key with this hash.

        For an event about a refused call, which never got the key's facility: one read,
        only when such an event is recorded (an allowed call knows its facility).
        """
        async with self._sessions() as session:
            found = await GatewayKeyRepository(session).facility_of_active_key(key_hash)
        return None if found is None else (found.id, found.hotel_id)

    # --- reading ----------------------------------------------------------------------------

    async def page(
        self, where: AuditFilter, *, limit: int = 50, after: str | None = None
    ) -> AuditPage:
        """One page of matching events, newest first (``after``: the previous page's cursor)."""
        async with self._sessions() as session:
            return await AuditRepository(session).query(where, limit=limit, after=after)

    async def export(
        self, where: AuditFilter, *, page_size: int = EXPORT_PAGE
    ) -> AsyncIterator[AuditEventView]:
        """Every matching event, newest first, read a page at a time (one short read each)."""
        after: str | None = None
        while True:
            page = await self.page(where, limit=page_size, after=after)
            for event in page.events:
                yield event
            if page.next_cursor is None:
                return
            after = page.next_cursor

    async def actors_since(self, since: datetime, *, limit: int = 200) -> list[ActorSeen]:
        """Who acted since ``since``, most recently active first (the audit page's picker)."""
        async with self._sessions() as session:
            return await AuditRepository(session).actors_since(since, limit=limit)

    async def owner(self, student_id: str) -> Owner:
        """What belongs to the customer ``student_id``: itself and its facilities."""
        async with self._sessions() as session:
            return await AuditRepository(session).owner(student_id)

    async def facility_ids(self, hotel_id: str) -> tuple[int, ...]:
        """The row id of the facility ``hotel_id`` as a filter (empty: no such facility)."""
        async with self._sessions() as session:
            found = await AuditRepository(session).facility_id(hotel_id)
        return () if found is None else (found,)

    # --- retention -----------------------------------------------------------------------

    async def purge_expired(self, now: datetime | None = None) -> int:
        """Remove the events older than the retention period; how many went.

        The purge itself is recorded (``audit.purged``) in the same transaction.
        """
        moment = now or self._clock.now()
        cutoff = moment - self.retention
        async with self._sessions.begin() as session:
            removed = await AuditRepository(session).purge_before(cutoff)
            facts: EventFacts = {
                "actor": Actor.system(),
                "subject": "audit_events",
                "details": {"removed": removed, "before": cutoff},
            }
            await self._append(session, self._event(AuditAction.AUDIT_PURGED, facts), facts)
        return removed

    # --- key expiry ----------------------------------------------------------------------

    async def record_expired_keys(
        self, now: datetime | None = None, *, actor: Actor | None = None
    ) -> int:
        """Record ``key.expired`` once for each unrevoked key whose expiry has passed; how many.

        Idempotent without a mark on the key: the trail itself says which keys already have
        their event (``details.key_id`` of the ``key.expired`` events since the earliest
        expiry looked at). Only expiries within the retention period are looked at, so a
        purged event is never recorded again. A scan and its events are one transaction.
        """
        moment = now or self._clock.now()
        horizon = moment - self.retention
        who = actor or Actor.job("record-key-expiry")
        async with self._sessions.begin() as session:
            expired = [
                key
                for key in await GatewayKeyRepository(session).unrevoked()
                if key.expires_at is not None and horizon < key.expires_at <= moment
            ]
            if not expired:
                return 0
            repository = AuditRepository(session)
            where = AuditFilter(
                since=min(key.expires_at for key in expired if key.expires_at is not None),
                action_prefix=AuditAction.KEY_EXPIRED.value,
            )
            recorded: set[Any] = set()
            after: str | None = None
            while True:
                page = await repository.query(where, limit=EXPORT_PAGE, after=after)
                recorded.update(event.details.get("key_id") for event in page.events)
                if page.next_cursor is None:
                    break
                after = page.next_cursor
            added = 0
            for key in expired:
                if key.id in recorded:
                    continue
                facts: EventFacts = {
                    "actor": who,
                    "subject": f"key:{key.prefix}",
                    "details": {"key_id": key.id, "expires_at": key.expires_at, "label": key.label},
                    "facility_id": key.facility_id,
                }
                await self._append(session, self._event(AuditAction.KEY_EXPIRED, facts), facts)
                added += 1
        return added


def _observe_on_commit(session: Session, observer: AuditObserver, event: _Event) -> None:
    """Tell ``observer`` of ``event`` once the session's transaction commits."""
    pending = session.info.get(_PENDING)
    if pending is None:
        pending = session.info[_PENDING] = []
        sa_event.listen(session, "after_commit", _report_pending)
        sa_event.listen(session, "after_rollback", _drop_pending)
    pending.append((observer, event.action, event.outcome))


def _report_pending(session: Session) -> None:
    pending = session.info.get(_PENDING) or []
    for observer, action, outcome in pending:
        observer(action, outcome)
    pending.clear()


def _drop_pending(session: Session) -> None:
    pending = session.info.get(_PENDING)
    if pending:
        pending.clear()
