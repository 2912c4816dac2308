"""The registry check: each apartment maps to its room type's listing (docs/requirements.md R18.3).

An apartment not mapped to the right listing in the registry makes the assistant answer
"Listing unavailable" (docs/requirements.md R18.3). This module finds every such
apartment before a guest does, says why in plain words and how to fix it, and repairs
what can be repaired without a person.

- :func:`assess` (pure) compares the registry rows with the workspace's listings
  (``GET /v1/listings``; a listing's room type is :func:`listing_room_type`) and answers
  a :class:`RegistryReport`: one :class:`ApartmentMapping` per apartment (the listing it
  maps to, by name and room type) and one typed :class:`RegistryProblem` per wrong or
  missing mapping — its reason, its fix, and what the automatic fix would change
  (``automatic``; None when only a person can fix it).
- :func:`check_registry` reads the rows and the listings and assesses them;
  :func:`check_and_record` also stores the report (``registry_checks``: the latest check
  of each customer), which the console and the admin's "needs attention" view read
  through :class:`RegistryChecks` without asking the platform. The onboarding step 11,
  the ``check-registry`` job, the console and ``pmsgate customers check-registry`` run it.
- :func:`fix_registry` applies the automatic fixes in one transaction with their audit
  event (``registry.fixed``): only unambiguous matches (exactly one listing of the
  apartment's room type); ambiguous ones are left listed for a person. Running it again
  changes nothing. ``pmsgate customers fix-registry`` and the console's "Fix the
  registry" run it.

A workspace that lists no listings while the registry has apartments is never "fixed":
that is the booking-system connection failing (docs/requirements.md R11.3: every apartment
unavailable at once), and detaching every listing would only lose the mapping. The report says so
(``unchecked``) with the reconnect as the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import Any, cast

import structlog
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor, AuditAction
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.customers.context import CustomerServices
from pmsgate.customers.service import listing_room_type, upstream_error
from pmsgate.errors import Conflict
from pmsgate.integrations.assistant.client import Listing
from pmsgate.integrations.assistant.errors import AssistantError
from pmsgate.storage.apartments import ApartmentRepository, ApartmentView
from pmsgate.storage.models import RegistryCheckStatus
from pmsgate.storage.registry_checks import RegistryCheckRepository, RegistryCheckView

log = structlog.get_logger(__name__)

RECONNECT_FIX = (
    "Reconnect the booking system with its current API password (the reconnect form): the "
    "platform lists the apartments again, then check the registry again."
)


class ProblemKind(StrEnum):
    """What is wrong with one apartment's mapping (or with one listing)."""

    # The row has no listing, and exactly one listing has its room type.
    NOT_MAPPED = "not_mapped"
    # No listing of the workspace has the apartment's room type.
    MISSING_LISTING = "missing_listing"
    # The row maps to a listing the workspace no longer has.
    LISTING_DELETED = "listing_deleted"
    # The row maps to a listing of another room type (another apartment's).
    ROOM_TYPE_MISMATCH = "room_type_mismatch"
    # Several listings have the apartment's room type: which one is a person's call.
    AMBIGUOUS_LISTING = "ambiguous_listing"
    # A listing no apartment maps to (no row of its room type, a duplicate, or no room type).
    LISTING_WITHOUT_APARTMENT = "listing_without_apartment"


@dataclass(frozen=True)
class RegistryProblem:
    """One wrong or missing mapping: why, the fix in plain words, the automatic change."""

    kind: ProblemKind
    room_type: str | None
    apartment: str
    listing_id: str | None
    reason: str
    fix: str
    # What `fix-registry` would change; None when only a person can fix it.
    automatic: str | None = None
    # The listing the automatic fix maps the apartment to (or the row it creates for).
    target_listing_id: str | None = None
    target_listing_name: str | None = None

    @property
    def fixable(self) -> bool:
        """True when the automatic fix repairs it."""
        return self.automatic is not None


@dataclass(frozen=True)
class ApartmentMapping:
    """One apartment of the registry and the listing it maps to (None: to none)."""

    room_type: str
    name: str
    listing_id: str | None
    listing_name: str | None = None
    listing_room_type: str | None = None
    problem: RegistryProblem | None = None

    @property
    def ok(self) -> bool:
        """True when it maps to an existing listing of its room type."""
        return self.problem is None and self.listing_id is not None


@dataclass(frozen=True)
class RegistryReport:
    """The result of one registry check of a customer."""

    student_id: str
    checked_at: datetime
    status: RegistryCheckStatus
    workspace_id: str | None
    listings: int
    apartments: list[ApartmentMapping] = field(default_factory=list)
    # Every problem: the apartments' (in their order), then the listings without apartment.
    problems: list[RegistryProblem] = field(default_factory=list)
    # Why the registry could not be checked, or is not applicable; and what to do.
    reason: str | None = None
    fix: str | None = None

    @property
    def ok(self) -> bool:
        """True when nothing needs attention (every apartment correctly mapped, or Route B)."""
        return self.status in ("ok", "not_applicable")

    @property
    def fixable(self) -> list[RegistryProblem]:
        """The problems the automatic fix repairs."""
        return [p for p in self.problems if p.fixable]

    @property
    def for_a_person(self) -> list[RegistryProblem]:
        """The problems only a person can fix."""
        return [p for p in self.problems if not p.fixable]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view (what ``registry_checks.report`` stores)."""
        plain = asdict(self)
        plain["checked_at"] = self.checked_at.isoformat()
        return plain

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RegistryReport:
        """The report a stored ``as_dict`` describes."""

        def problem(item: dict[str, Any] | None) -> RegistryProblem | None:
            if item is None:
                return None
            return RegistryProblem(**{**item, "kind": ProblemKind(item["kind"])})

        return cls(
            student_id=str(data["student_id"]),
            checked_at=datetime.fromisoformat(str(data["checked_at"])),
            status=cast(RegistryCheckStatus, data["status"]),
            workspace_id=data.get("workspace_id"),
            listings=int(data.get("listings") or 0),
            apartments=[
                ApartmentMapping(**{**item, "problem": problem(item.get("problem"))})
                for item in data.get("apartments") or []
            ],
            problems=[
                p for p in (problem(item) for item in data.get("problems") or []) if p is not None
            ],
            reason=data.get("reason"),
            fix=data.get("fix"),
        )


@dataclass(frozen=True)
class RegistryChange:
    """One change of the automatic fix: the apartment, its listing before and after."""

    action: str  # attach, replace, detach, create
    room_type: str
    apartment: str
    before: str | None
    after: str | None
    description: str


@dataclass(frozen=True)
class RegistryFix:
    """What one run of the fix changed (or would change, in a dry run) and what it left."""

    student_id: str
    dry_run: bool
    changes: list[RegistryChange]
    left_for_a_person: list[RegistryProblem]
    before: RegistryReport
    after: RegistryReport

    @property
    def changed(self) -> bool:
        """True when the registry was changed (never in a dry run)."""
        return bool(self.changes) and not self.dry_run

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "student_id": self.student_id,
            "dry_run": self.dry_run,
            "changes": [asdict(c) for c in self.changes],
            "left_for_a_person": [asdict(p) for p in self.left_for_a_person],
            "status_after": self.after.status,
            "problems_after": len(self.after.problems),
        }


# --- the check ---------------------------------------------------------------------------------


def _order(room_type: str) -> tuple[int, int, str]:
    return (0, int(room_type), "") if room_type.isdigit() else (1, 0, room_type)


def _label(listing: Listing) -> str:
    room_type = listing_room_type(listing)
    name = listing.name.strip() or "(no name)"
    return f"“{name}” (room type {room_type})" if room_type else f"“{name}” (no room type)"


def _apartment_name(row: ApartmentView) -> str:
    return row.name.strip() or f"room type {row.pms_room_type_id}"


def _row_problem(
    row: ApartmentView,
    candidates: Sequence[Listing],
    current: Listing | None,
) -> RegistryProblem | None:
    """The problem of one row (None when it maps to the one listing of its room type)."""
    room_type = row.pms_room_type_id
    name = _apartment_name(row)
    target = candidates[0] if len(candidates) == 1 else None

    def problem(kind: ProblemKind, reason: str, fix: str, automatic: str | None) -> RegistryProblem:
        return RegistryProblem(
            kind=kind,
            room_type=room_type,
            apartment=name,
            listing_id=row.assistant_listing_id,
            reason=reason,
            fix=fix,
            automatic=automatic if target is not None else None,
            target_listing_id=target.id if target is not None and automatic else None,
            target_listing_name=target.name if target is not None and automatic else None,
        )

    unavailable = "guests asking about it get 'Listing unavailable'"
    ambiguous_fix = (
        f"{len(candidates)} listings of the workspace have room type {room_type}: "
        + ", ".join(_label(c) for c in candidates)
        + ". Remove the duplicate on the platform, or have the platform team map the right "
        "one by hand."
    )

    def remap_fix(without_candidates: str) -> str:
        """How a mapped row is fixed: to its one candidate, or as there are none or several."""
        if target is not None:
            return f"Map it to the listing of its room type, {_label(target)}."
        return ambiguous_fix if candidates else without_candidates

    if row.assistant_listing_id is None:
        if target is not None:
            return problem(
                ProblemKind.NOT_MAPPED,
                f"{name} is mapped to no listing: {unavailable}.",
                f"Map it to the listing of its room type, {_label(target)}.",
                f"map {name} to listing {_label(target)}",
            )
        if candidates:
            return problem(
                ProblemKind.AMBIGUOUS_LISTING,
                f"{name} is mapped to no listing, and several listings have its room type.",
                ambiguous_fix,
                None,
            )
        return problem(
            ProblemKind.MISSING_LISTING,
            f"The workspace has no listing for {name} (room type {room_type}): {unavailable}.",
            "Check that the apartment is active in the booking system and wait for the "
            "platform's listings sync (or remove the apartment from the registry if it is "
            "gone for good); then check again.",
            None,
        )

    if current is None:
        return problem(
            ProblemKind.LISTING_DELETED,
            f"{name} is mapped to a listing the workspace no longer has: {unavailable}.",
            remap_fix(
                f"The workspace has no listing of room type {room_type} any more: check the "
                "apartment in the booking system and the platform's listings sync."
            ),
            f"map {name} to listing {_label(target)} instead of the deleted one"
            if target is not None
            else None,
        )
    listed_as = listing_room_type(current)
    if listed_as != room_type:
        return problem(
            ProblemKind.ROOM_TYPE_MISMATCH,
            f"{name} (room type {room_type}) is mapped to listing {_label(current)}, "
            f"another apartment's: {unavailable}, or answers with the other apartment's facts.",
            remap_fix(
                f"No listing has room type {room_type}: detach {_label(current)} from it and "
                "check the apartment in the booking system."
            ),
            f"map {name} to listing {_label(target)} instead of {_label(current)}"
            if target is not None
            else None,
        )
    return None


def assess(
    student_id: str,
    rows: Iterable[ApartmentView],
    listings: Sequence[Listing],
    *,
    checked_at: datetime,
    workspace_id: str | None,
) -> RegistryReport:
    """Compare the registry rows with the workspace's listings (no request, no write)."""
    rows = sorted(rows, key=lambda r: _order(r.pms_room_type_id))
    base: dict[str, Any] = {
        "student_id": student_id,
        "checked_at": checked_at,
        "workspace_id": workspace_id,
        "listings": len(listings),
    }
    if not listings:
        return _without_listings(base, rows)
    by_room_type: dict[str, list[Listing]] = {}
    for listing in listings:
        room_type = listing_room_type(listing)
        if room_type is not None:
            by_room_type.setdefault(room_type, []).append(listing)
    mappings, problems, explained = _mapped_rows(rows, listings, by_room_type)
    problems += _listings_without_apartment(rows, listings, by_room_type, explained)
    return RegistryReport(
        **base,
        status="problems" if problems else "ok",
        apartments=mappings,
        problems=problems,
    )


def _without_listings(base: dict[str, Any], rows: Sequence[ApartmentView]) -> RegistryReport:
    """The report when the workspace lists no listing: nothing to check, or nothing checkable."""
    unverified = [
        ApartmentMapping(r.pms_room_type_id, _apartment_name(r), r.assistant_listing_id)
        for r in rows
    ]
    if not unverified:
        return RegistryReport(
            **base,
            status="not_applicable",
            reason="The workspace has no listings and the registry no apartments "
            "(Route B: custom tools only, no per-listing knowledge).",
        )
    return RegistryReport(
        **base,
        status="unchecked",
        apartments=unverified,
        reason=f"The workspace lists no listings while the registry has {len(unverified)} "
        "apartments: the platform's booking-system connection fails (or the partner is "
        "not linked), so every apartment answers 'Listing unavailable'.",
        fix=RECONNECT_FIX,
    )


def _mapped_rows(
    rows: Sequence[ApartmentView],
    listings: Sequence[Listing],
    by_room_type: dict[str, list[Listing]],
) -> tuple[list[ApartmentMapping], list[RegistryProblem], set[str]]:
    """Each row's mapping and problem, and the listings those problems already name."""
    by_id = {listing.id: listing for listing in listings}
    mappings: list[ApartmentMapping] = []
    problems: list[RegistryProblem] = []
    explained: set[str] = set()  # listings a row's problem already names
    for row in rows:
        candidates = by_room_type.get(row.pms_room_type_id, [])
        current = by_id.get(row.assistant_listing_id or "")
        found = _row_problem(row, candidates, current)
        if found is not None:
            problems.append(found)
            if found.kind is ProblemKind.AMBIGUOUS_LISTING or (
                found.target_listing_id is None and len(candidates) > 1
            ):
                explained.update(c.id for c in candidates)
            if found.target_listing_id is not None:
                explained.add(found.target_listing_id)
        mappings.append(
            ApartmentMapping(
                room_type=row.pms_room_type_id,
                name=_apartment_name(row),
                listing_id=row.assistant_listing_id,
                listing_name=current.name if current is not None else None,
                listing_room_type=listing_room_type(current) if current is not None else None,
                problem=found,
            )
        )
    return mappings, problems, explained


def _listings_without_apartment(
    rows: Sequence[ApartmentView],
    listings: Sequence[Listing],
    by_room_type: dict[str, list[Listing]],
    explained: set[str],
) -> list[RegistryProblem]:
    """A problem for each listing no apartment maps to (and no row's problem names)."""
    by_id = {listing.id: listing for listing in listings}
    # Listings mapped to an apartment of their own room type (a listing held by another
    # apartment is still looking for its own).
    mapped = {
        row.assistant_listing_id
        for row in rows
        if row.assistant_listing_id in by_id
        and listing_room_type(by_id[row.assistant_listing_id]) == row.pms_room_type_id
    }
    room_types = {row.pms_room_type_id for row in rows}
    return [
        _listing_without_apartment(listing, room_types, by_room_type)
        for listing in listings
        if listing.id not in mapped and listing.id not in explained
    ]


def _listing_without_apartment(
    listing: Listing, room_types: set[str], by_room_type: dict[str, list[Listing]]
) -> RegistryProblem:
    room_type = listing_room_type(listing)
    name = listing.name.strip() or "(no name)"
    problem = partial(
        RegistryProblem,
        kind=ProblemKind.LISTING_WITHOUT_APARTMENT,
        room_type=room_type,
        apartment=name,
        listing_id=listing.id,
    )
    if room_type is None:
        return problem(
            reason=f"Listing {_label(listing)} does not say which booking-system room "
            "type it mirrors, so no apartment can be mapped to it.",
            fix="Check the listing on the platform (its booking-system room type), "
            "then check again.",
        )
    if room_type not in room_types and len(by_room_type[room_type]) == 1:
        return problem(
            reason=f"Listing {_label(listing)} has no apartment in the registry: "
            "its knowledge is never synced.",
            fix=f"Add the apartment of room type {room_type} to the registry, mapped "
            "to this listing.",
            automatic=f"add apartment {name} (room type {room_type}) mapped to "
            f"listing {_label(listing)}",
            target_listing_id=listing.id,
            target_listing_name=listing.name,
        )
    return problem(
        reason=f"Listing {_label(listing)} is one of "
        f"{len(by_room_type[room_type])} listings of room type {room_type}; "
        "no apartment maps to it.",
        fix="Remove the duplicate listing on the platform, or check which listing "
        "the apartment should map to.",
    )


def unchecked(
    student_id: str, checked_at: datetime, reason: str, fix: str, workspace_id: str | None = None
) -> RegistryReport:
    """A report saying why the registry could not be checked."""
    return RegistryReport(
        student_id=student_id,
        checked_at=checked_at,
        status="unchecked",
        workspace_id=workspace_id,
        listings=0,
        reason=reason,
        fix=fix,
    )


async def _read(
    services: CustomerServices, student_id: str
) -> tuple[str, str | None, list[ApartmentView], list[Listing] | None]:
    ctx = await services.context(student_id)
    if ctx.workspace_id is None:
        return ctx.student_id, None, list(ctx.apartments), None
    try:
        listings = await services.assistant.list_listings(ctx.workspace_id)
    except AssistantError as error:
        raise upstream_error(error, "reading the listings") from None
    return ctx.student_id, ctx.workspace_id, list(ctx.apartments), listings


NO_WORKSPACE = (
    "The customer has no platform workspace yet, so it has no listings to map.",
    "Run onboarding (step 5 creates the workspace), then check again.",
)


async def check_registry(services: CustomerServices, student_id: str) -> RegistryReport:
    """Read the registry and the workspace's listings; the report (nothing is stored)."""
    student, workspace_id, rows, listings = await _read(services, student_id)
    now = services.clock.now()
    if listings is None:
        return unchecked(student, now, *NO_WORKSPACE)
    return assess(student, rows, listings, checked_at=now, workspace_id=workspace_id)


async def check_and_record(services: CustomerServices, student_id: str) -> RegistryReport:
    """:func:`check_registry`, then store the report as the customer's latest check.

    A platform failure raises (the previous check stays: it is not replaced by a guess).
    """
    report = await check_registry(services, student_id)
    await registry_checks(services).record(report)
    return report


async def refresh_after_sync(services: CustomerServices, student_id: str) -> None:
    """After a listings sync: check again when the stored check was not clean (best effort).

    A reconnect brings the listings back and the sync maps them: the console should not
    go on saying "not checked" or showing problems the sync just repaired until the next
    ``check-registry`` tick. Never raises: the sync succeeded whatever this says.
    """
    try:
        latest = await registry_checks(services).latest(student_id)
        if latest is None or latest.ok:
            return
        await check_and_record(services, student_id)
    except Exception as error:  # the next check-registry tick tries again
        log.warning(
            "registry_check_after_sync_failed", student_id=student_id, error=type(error).__name__
        )


# --- the stored checks -------------------------------------------------------------------------


class RegistryChecks:
    """The latest check of each customer (``registry_checks``), one transaction per call."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], clock: Clock) -> None:
        self._sessions = sessions
        self._clock = clock

    async def record(self, report: RegistryReport) -> None:
        """Store the report as the customer's latest check."""
        async with self._sessions.begin() as session:
            await RegistryCheckRepository(session).put(
                report.student_id,
                checked_at=report.checked_at,
                status=report.status,
                problems=len(report.problems),
                report=report.as_dict(),
            )

    async def latest(self, student_id: str) -> RegistryReport | None:
        """The customer's latest check, if one ran."""
        async with self._sessions() as session:
            view = await RegistryCheckRepository(session).find(student_id.strip())
        return RegistryReport.from_dict(view.report) if view is not None else None

    async def all(self) -> list[RegistryCheckView]:
        """Every customer's latest check (its status and problem count), by student_id."""
        async with self._sessions() as session:
            return await RegistryCheckRepository(session).all()


def registry_checks(services: CustomerServices) -> RegistryChecks:
    """The stored checks on the customer services' database."""
    return RegistryChecks(services.sessions, services.clock)


async def latest_registry_check(
    services: CustomerServices, student_id: str
) -> RegistryReport | None:
    """The customer's latest registry check, read from the database (no platform call).

    What the console shows (``_registry_panel.html`` takes it as ``registry``); None
    before the first check.
    """
    return await registry_checks(services).latest(student_id)


async def latest_problems(services: CustomerServices) -> dict[str, list[str]]:
    """Every customer whose latest check found problems: the reason of each (one query).

    What the admin's "needs attention" view lists. A registry that could not be checked
    (no listings: the booking-system connection) is not listed here: the integration's
    ``error`` already is.
    """
    async with services.sessions() as session:
        wanted: tuple[RegistryCheckStatus, ...] = ("problems",)
        views = await RegistryCheckRepository(session).with_status(wanted)
    return {
        view.student_id: [str(p.get("reason", "")) for p in view.report.get("problems") or []]
        for view in views
    }


# --- the fix -----------------------------------------------------------------------------------


def plan_fix(report: RegistryReport, rows: Sequence[ApartmentView]) -> list[RegistryChange]:
    """The changes the automatic fix makes: unambiguous matches only, in a safe order.

    A listing that moves to its apartment is first detached from the row that holds it
    wrongly (the registry's UNIQUE (student_id, listing) would refuse it otherwise).
    """
    by_room_type = {row.pms_room_type_id: row for row in rows}
    holder = {row.assistant_listing_id: row for row in rows if row.assistant_listing_id}
    targets: dict[str, RegistryProblem] = {}  # room type → the problem that maps it
    creations: list[RegistryProblem] = []
    for problem in report.fixable:
        if problem.room_type is None or problem.target_listing_id is None:
            continue
        if problem.kind is ProblemKind.LISTING_WITHOUT_APARTMENT:
            creations.append(problem)
        else:
            targets[problem.room_type] = problem
    detach: list[RegistryChange] = []
    moving = set(targets)
    for problem in [*targets.values(), *creations]:
        taken_by = holder.get(problem.target_listing_id or "")
        if taken_by is None or taken_by.pms_room_type_id in moving:
            continue
        moving.add(taken_by.pms_room_type_id)
        detach.append(
            RegistryChange(
                action="detach",
                room_type=taken_by.pms_room_type_id,
                apartment=_apartment_name(taken_by),
                before=taken_by.assistant_listing_id,
                after=None,
                description=f"detach listing “{problem.target_listing_name}” from "
                f"{_apartment_name(taken_by)} (room type {taken_by.pms_room_type_id}): it is "
                f"room type {problem.room_type}'s",
            )
        )
    changes = list(detach)
    for room_type, problem in sorted(targets.items(), key=lambda item: _order(item[0])):
        row = by_room_type.get(room_type)
        changes.append(
            RegistryChange(
                action="attach" if row is None or row.assistant_listing_id is None else "replace",
                room_type=room_type,
                apartment=problem.apartment,
                before=row.assistant_listing_id if row is not None else None,
                after=problem.target_listing_id,
                description=problem.automatic or "",
            )
        )
    for problem in creations:
        assert problem.room_type is not None
        changes.append(
            RegistryChange(
                action="create",
                room_type=problem.room_type,
                apartment=problem.apartment,
                before=None,
                after=problem.target_listing_id,
                description=problem.automatic or "",
            )
        )
    return changes


async def _apply(
    services: CustomerServices,
    audit: AuditTrail,
    actor: Actor,
    student_id: str,
    changes: Sequence[RegistryChange],
    left: Sequence[RegistryProblem],
) -> None:
    """Every change and its audit event in one transaction (all or nothing)."""
    now = services.clock.now()
    try:
        async with services.sessions.begin() as session:
            repository = ApartmentRepository(session)
            # Detach every listing that moves first, so no UNIQUE (student_id, listing)
            # meets a listing half-way between two apartments.
            for change in changes:
                if change.action in ("detach", "replace"):
                    await repository.update(
                        student_id, change.room_type, {"assistant_listing_id": None}, now
                    )
            for change in changes:
                if change.action in ("attach", "replace"):
                    await repository.update(
                        student_id, change.room_type, {"assistant_listing_id": change.after}, now
                    )
                elif change.action == "create":
                    await repository.upsert(
                        student_id,
                        change.room_type,
                        {
                            "assistant_listing_id": change.after,
                            "notes_page_id": None,
                            "name": change.apartment,
                        },
                        now,
                    )
            await audit.record_in(
                session,
                AuditAction.REGISTRY_FIXED,
                actor=actor,
                subject=f"customer:{student_id}",
                details={
                    "changes": [
                        {
                            "action": c.action,
                            "room_type": c.room_type,
                            "from": c.before,
                            "to": c.after,
                        }
                        for c in changes
                    ],
                    "left_for_a_person": [
                        {"kind": p.kind.value, "room_type": p.room_type, "listing": p.listing_id}
                        for p in left
                    ],
                },
                student_id=student_id,
            )
    except IntegrityError:
        raise Conflict(
            f"The registry of {student_id} changed while it was being fixed; nothing was changed.",
            code="registry_changed",
            hint="Run the fix again: it reads the registry afresh.",
        ) from None


async def fix_registry(
    services: CustomerServices,
    student_id: str,
    *,
    audit: AuditTrail,
    actor: Actor,
    dry_run: bool = False,
) -> RegistryFix:
    """Repair the wrong or missing mappings that have one right answer; report the rest.

    ``dry_run``: nothing is changed, the answer says what would be. Otherwise the changes
    and their ``registry.fixed`` audit event commit together, and the report after the fix
    is stored as the customer's latest check. A registry that cannot be checked (no
    workspace, no listings at all) is refused with the reason: nothing is changed.
    """
    student, workspace_id, rows, listings = await _read(services, student_id)
    now = services.clock.now()
    if listings is None:
        before = unchecked(student, now, *NO_WORKSPACE)
    else:
        before = assess(student, rows, listings, checked_at=now, workspace_id=workspace_id)
    if before.status == "unchecked":
        await registry_checks(services).record(before)
        raise Conflict(
            f"The registry of {student} cannot be checked: {before.reason}",
            code="registry_unchecked",
            hint=before.fix or "Check the customer's workspace, then run the fix again.",
        )
    changes = plan_fix(before, rows)
    left = before.for_a_person
    after = before
    if changes and not dry_run:
        await _apply(services, audit, actor, student, changes, left)
        rows_after = await services.apartments.of_student(student)
        after = assess(
            student,
            rows_after,
            listings or [],
            checked_at=services.clock.now(),
            workspace_id=workspace_id,
        )
        log.info(
            "registry_fixed",
            student_id=student,
            changes=len(changes),
            left_for_a_person=len(left),
            actor=str(actor),
        )
    if not dry_run:
        await registry_checks(services).record(after)
    return RegistryFix(
        student_id=student,
        dry_run=dry_run,
        changes=changes,
        left_for_a_person=list(after.problems if not dry_run else left),
        before=before,
        after=after,
    )
