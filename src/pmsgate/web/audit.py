"""The audit trail's pages in the console (the event every console action leaves is
:func:`pmsgate.web.actions.console_action`).

``/console/audit`` shows events newest first, filterable by action (a family such as
``key.`` or one action), outcome, actor (and its kind), first and last day and (admins
only) customer — the admin's form offers pickers for each —, fifty to a page (keyset: "older"
follows the last event's cursor); ``/console/audit/export.jsonl`` downloads the same
selection as JSON lines, and ``/console/audit/export.csv`` (or ``export.jsonl?format=csv``)
as a spreadsheet: a customer's user gets when and what happened in words, in its language
and time zone; an admin the stored fields. An admin sees every event. A customer's user
sees only its own customer's (events naming the customer or one of its facilities): the
scope comes from the session, never from the query string, so editing the URL changes
nothing.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from pmsgate import i18n
from pmsgate.audit.actions import ACTOR_KINDS, AuditAction, Outcome
from pmsgate.errors import Forbidden, InvalidInput
from pmsgate.storage.audit import AuditEventView, AuditFilter, Owner
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.customer_events import event_text
from pmsgate.web.pages import PagePrincipal, render_page
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
_ACTION_PREFIX = re.compile(r"[a-z_.]{0,64}")
_OUTCOMES = tuple(outcome.value for outcome in Outcome)
# The actor picker offers who acted in the last 30 days, the most recently active first.
ACTORS_SEEN_FOR = timedelta(days=30)
ACTORS_SHOWN = 200


# --- the trail's pages ------------------------------------------------------------------------


def _day(value: str | None, *, name: str, code: str) -> date | None:
    if not value or not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(
            f"{value[:40]!r} is not a date.",
            code=code,
            hint=f"Give the {name} day as YYYY-MM-DD.",
        ) from None


def _since(value: str | None) -> datetime | None:
    day = _day(value, name="first", code="invalid_since")
    return None if day is None else datetime.combine(day, time.min, tzinfo=UTC)


def _until(value: str | None) -> datetime | None:
    """The end of the last day asked for (the day is included)."""
    day = _day(value, name="last", code="invalid_until")
    return None if day is None else datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)


def _action_prefix(value: str | None) -> str | None:
    prefix = (value or "").strip().lower()
    if not _ACTION_PREFIX.fullmatch(prefix):
        raise InvalidInput(
            "An action filter is an action name or its start (letters, `_` and `.`).",
            code="invalid_action_filter",
            hint="For example `key.` or `signin.failed`.",
        )
    return prefix or None


def _listed(
    value: str | None, allowed: Sequence[str], what: str, code: str, hint: str
) -> str | None:
    """``value`` (any case) when it is one of ``allowed``; None when empty; else 422 ``code``."""
    chosen = (value or "").strip().lower()
    if chosen and chosen not in allowed:
        raise InvalidInput(f"{what} is one of {', '.join(allowed)}.", code=code, hint=hint)
    return chosen or None


def _outcome(value: str | None) -> str | None:
    return _listed(
        value,
        _OUTCOMES,
        "The outcome",
        "invalid_outcome_filter",
        "Pick an outcome from the list, or none.",
    )


def _actor_kind(value: str | None) -> str | None:
    return _listed(
        value,
        ACTOR_KINDS,
        "The kind of actor",
        "invalid_actor_kind_filter",
        "Pick a kind of actor from the list, or any.",
    )


async def _owner(web: WebServices, principal: Principal, customer: str | None) -> Owner | None:
    """Whose events the user may see: an admin's choice (or all), a customer's own, always."""
    if principal.is_admin:
        chosen = (customer or "").strip()
        if not chosen:
            return None
        owner = await web.audit.owner(chosen)
        if owner.customer_id is None and not owner.facility_ids:
            raise InvalidInput(
                f"There is no customer {chosen[:60]!r}.",
                code="unknown_customer_filter",
                hint="Pick a customer from the list (its student id), or leave it empty.",
            )
        return owner
    if principal.student_id is None:  # a customer login always has one (CHECK constraint)
        raise Forbidden("This login has no customer.")
    return await web.audit.owner(principal.student_id)


class AuditQuery(BaseModel):
    """What the audit page's form asks for, as typed (each value at most 200 characters).

    The filters of the page and of its exports: one set of query parameters (:data:`QueryDep`),
    one set of names.
    """

    model_config = ConfigDict(frozen=True)

    action: str | None = Field(default=None, max_length=200)
    customer: str | None = Field(default=None, max_length=200)
    actor: str | None = Field(default=None, max_length=200)
    actor_kind: str | None = Field(default=None, max_length=200)
    outcome: str | None = Field(default=None, max_length=200)
    since: str | None = Field(default=None, max_length=200)
    until: str | None = Field(default=None, max_length=200)


async def _selection(
    web: WebServices, principal: Principal, query: AuditQuery
) -> tuple[AuditFilter, dict[str, str]]:
    """The filter of a request and the query parameters that repeat it (for links).

    Every filter narrows within what the user may see: a customer's user's selection is
    always its own customer's, whatever ``customer`` says.
    """
    admin = principal.is_admin
    actor = (query.actor or "").strip()
    where = AuditFilter(
        since=_since(query.since),
        until=_until(query.until),
        owner=await _owner(web, principal, query.customer),
        action_prefix=_action_prefix(query.action),
        actor=actor or None,
        actor_kind=_actor_kind(query.actor_kind),
        outcome=_outcome(query.outcome),
    )
    shown = {
        "action": where.action_prefix or "",
        "outcome": where.outcome or "",
        "since": (query.since or "").strip() if where.since else "",
        "until": (query.until or "").strip() if where.until else "",
        "customer": (query.customer or "").strip() if admin else "",
        "actor": actor,
        "actor_kind": where.actor_kind or "",
    }
    return where, {name: value for name, value in shown.items() if value}


def _action_groups() -> list[tuple[str, list[str]]]:
    """Every action under its family (``key.`` …), for the action picker."""
    groups: dict[str, list[str]] = {}
    for action in AuditAction:
        groups.setdefault(action.value.split(".", 1)[0] + ".", []).append(action.value)
    return sorted((family, sorted(actions)) for family, actions in groups.items())


async def _pickers(web: WebServices) -> dict[str, Any]:
    """The choices of the admin's filters: customers, recent actors, actions, kinds."""
    customers = sorted(await web.customers.customers.all(), key=lambda c: c.name.lower())
    actors = await web.audit.actors_since(web.clock.now() - ACTORS_SEEN_FOR, limit=ACTORS_SHOWN)
    groups = _action_groups()
    return {
        # A typed family or action the lists do not name stays selected as typed.
        "known_actions": {name for family, actions in groups for name in (family, *actions)},
        "customer_choices": [(c.student_id, c.name) for c in customers],
        "actor_choices": actors,
        "action_groups": groups,
        "actor_kinds": ACTOR_KINDS,
    }


QueryDep = Annotated[AuditQuery, Query()]
Text = Annotated[str | None, Query(max_length=200)]


@router.get("/console/audit", response_class=HTMLResponse)
async def audit_page(
    request: Request,
    web: WebDep,
    principal: PagePrincipal,
    query: QueryDep,
    after: Text = None,
) -> Response:
    """The audit trail: admins every event, a customer's user its own customer's."""
    where, params = await _selection(web, principal, query)
    page = await web.audit.page(where, limit=PAGE_SIZE, after=after)
    older = (
        "/console/audit?" + urlencode({**params, "after": page.next_cursor})
        if page.next_cursor
        else None
    )
    suffix = "?" + urlencode(params) if params else ""
    return render_page(
        request,
        "audit.html",
        {
            "principal": principal,
            "events": page.events,
            # A customer's user reads each event as a sentence (customer_events.event_text).
            "lines": None
            if principal.is_admin
            else [event_text(event, viewer=principal.email) for event in page.events],
            "filters": params,
            "outcomes": _OUTCOMES,
            "older": older,
            "first_page": not after,
            "export": "/console/audit/export.jsonl" + suffix,
            "export_csv": "/console/audit/export.csv" + suffix,
            **(await _pickers(web) if principal.is_admin else {}),
        },
    )


ExportFormat = Literal["jsonl", "csv"]
# The admin's CSV: the stored fields, as the JSON lines carry them (the team reads English).
_ADMIN_COLUMNS = (
    "occurred_at",
    "action",
    "outcome",
    "actor_kind",
    "actor",
    "subject",
    "details",
    "client_address",
    "request_id",
)
# A cell a spreadsheet would read as a formula starts with one of these: quoted with "'".
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _csv_line(cells: list[str], delimiter: str) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator="\r\n").writerow(
        [_cell(cell) for cell in cells]
    )
    return buffer.getvalue()


def _admin_row(event: AuditEventView) -> list[str]:
    plain = event.as_json()
    plain["details"] = json.dumps(event.details, ensure_ascii=False, sort_keys=True)
    return [plain[name] for name in _ADMIN_COLUMNS]


def _customer_row(event: AuditEventView, reader: i18n.Reader, viewer: str) -> list[str]:
    """When (the reader's local time, sortable) and what happened, in the reader's words."""
    with i18n.use_locale(reader.language, reader.timezone, reader.now):
        when = i18n.local(event.occurred_at).strftime("%Y-%m-%d %H:%M")
        return [when, event_text(event, viewer=viewer).text]


def _csv_lines(web: WebServices, principal: Principal, where: AuditFilter) -> AsyncIterator[str]:
    """The selection as CSV rows, newest first: plain words for a customer, fields for admins.

    Italian spreadsheets (Excel with an Italian locale) split a line on ";", English ones on
    ",": the separator follows the reader's language. A byte-order mark first, so Excel
    reads the accents as UTF-8.
    """
    # The reader is captured now: the rows are written while the response streams.
    reader = i18n.reader()
    delimiter = ";" if reader.language == "it" else ","
    if principal.is_admin:
        header = list(_ADMIN_COLUMNS)
    else:
        with i18n.use_locale(reader.language, reader.timezone, reader.now):
            zone = i18n.timezone_label()
            header = [
                i18n.gettext("When (%(zone)s time)") % {"zone": zone},
                i18n.gettext("What happened"),
            ]

    async def lines() -> AsyncIterator[str]:
        yield "\ufeff" + _csv_line(header, delimiter)
        async for event in web.audit.export(where):
            if principal.is_admin:
                row = _admin_row(event)
            else:
                row = _customer_row(event, reader, principal.email)
            yield _csv_line(row, delimiter)

    return lines()


@router.get("/console/audit/export.csv")
@router.get("/console/audit/export.jsonl")
async def audit_export(
    request: Request,
    web: WebDep,
    principal: PagePrincipal,
    query: QueryDep,
    export_format: Annotated[ExportFormat | None, Query(alias="format")] = None,
) -> Response:
    """The page's selection, streamed newest first: JSON lines (one event per line) or CSV.

    CSV with ``/console/audit/export.csv`` or ``format=csv``; same filters and scope.
    """
    where, _ = await _selection(web, principal, query)
    as_csv = export_format == "csv" or request.url.path.endswith(".csv")
    if as_csv and export_format != "jsonl":
        name = "audit-events.csv" if principal.is_admin else "activity.csv"
        return StreamingResponse(
            _csv_lines(web, principal, where),
            media_type="text/csv; charset=utf-8",
            headers={
                "Content-Disposition": f'attachment; filename="{name}"',
                "Cache-Control": "no-store",
            },
        )

    async def lines() -> AsyncIterator[str]:
        async for event in web.audit.export(where):
            yield json.dumps(event.as_json(), ensure_ascii=False) + "\n"

    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": 'attachment; filename="audit-events.jsonl"',
            "Cache-Control": "no-store",
        },
    )
