"""The web application's side of the audit trail: who the signed-in user is as an actor,
the event every console action leaves, and the trail's pages.

``/console/audit`` shows events newest first, filterable by action (a prefix such as
``key.``), outcome, date and (admins only) customer, fifty to a page (keyset: "older"
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
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, time
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from pmsgate import i18n
from pmsgate.audit.actions import AuditAction, Outcome
from pmsgate.errors import Forbidden, InvalidInput, PmsgateError
from pmsgate.storage.audit import AuditEventView, AuditFilter, Owner
from pmsgate.web.app import login_redirect
from pmsgate.web.auth import actor_of, optional_principal
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.customer_view import event_text
from pmsgate.web.templating import templates
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
_ACTION_PREFIX = re.compile(r"[a-z_.]{0,64}")
_OUTCOMES = tuple(outcome.value for outcome in Outcome)
MaybePrincipal = Annotated[Principal | None, Depends(optional_principal)]


@asynccontextmanager
async def console_action(
    web: WebServices,
    principal: Principal,
    operation: str,
    *,
    student_id: str,
    details: Mapping[str, Any] | None = None,
) -> AsyncIterator[None]:
    """Record ``console.action`` for what the block does: success, or failure with its code.

    The event is written after the block, in its own transaction: a failed action still
    leaves its event.
    """
    base = {"operation": operation, **(details or {})}
    try:
        yield
    except PmsgateError as error:
        await web.audit.record(
            AuditAction.CONSOLE_ACTION,
            actor=actor_of(principal),
            subject=f"customer:{student_id}",
            outcome=Outcome.FAILURE,
            details={**base, "error": error.code},
            student_id=student_id,
        )
        raise
    await web.audit.record(
        AuditAction.CONSOLE_ACTION,
        actor=actor_of(principal),
        subject=f"customer:{student_id}",
        outcome=Outcome.SUCCESS,
        details=base,
        student_id=student_id,
    )


# --- the trail's pages ------------------------------------------------------------------------


def _since(value: str | None) -> datetime | None:
    if not value or not value.strip():
        return None
    try:
        day = date.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(
            f"{value[:40]!r} is not a date.",
            code="invalid_since",
            hint="Give the first day as YYYY-MM-DD.",
        ) from None
    return datetime.combine(day, time.min, tzinfo=UTC)


def _action_prefix(value: str | None) -> str | None:
    prefix = (value or "").strip().lower()
    if not _ACTION_PREFIX.fullmatch(prefix):
        raise InvalidInput(
            "An action filter is an action name or its start (letters, `_` and `.`).",
            code="invalid_action_filter",
            hint="For example `key.` or `signin.failed`.",
        )
    return prefix or None


def _outcome(value: str | None) -> str | None:
    outcome = (value or "").strip().lower()
    if outcome and outcome not in _OUTCOMES:
        raise InvalidInput(
            f"The outcome is one of {', '.join(_OUTCOMES)}.",
            code="invalid_outcome_filter",
            hint="Pick an outcome from the list, or none.",
        )
    return outcome or None


async def _owner(web: WebServices, principal: Principal, customer: str | None) -> Owner | None:
    """Whose events the user may see: an admin's choice (or all), a customer's own, always."""
    if principal.is_admin:
        chosen = (customer or "").strip()
        return await web.audit.owner(chosen) if chosen else None
    if principal.student_id is None:  # a customer login always has one (CHECK constraint)
        raise Forbidden("This login has no customer.")
    return await web.audit.owner(principal.student_id)


async def _selection(
    web: WebServices,
    principal: Principal,
    *,
    action: str | None,
    customer: str | None,
    outcome: str | None,
    since: str | None,
) -> tuple[AuditFilter, dict[str, str]]:
    """The filter of a request and the query parameters that repeat it (for links)."""
    where = AuditFilter(
        since=_since(since),
        owner=await _owner(web, principal, customer),
        action_prefix=_action_prefix(action),
        outcome=_outcome(outcome),
    )
    shown = {
        "action": where.action_prefix or "",
        "outcome": where.outcome or "",
        "since": (since or "").strip() if where.since else "",
        "customer": (customer or "").strip() if principal.is_admin else "",
    }
    return where, {name: value for name, value in shown.items() if value}


Text = Annotated[str | None, Query(max_length=100)]


@router.get("/console/audit", response_class=HTMLResponse)
async def audit_page(
    request: Request,
    web: WebDep,
    principal: MaybePrincipal,
    action: Text = None,
    customer: Text = None,
    outcome: Text = None,
    since: Text = None,
    after: Text = None,
) -> Response:
    """The audit trail: admins every event, a customer's user its own customer's."""
    from pmsgate.web.console import PAGE_HEADERS, error_page

    if principal is None:
        return login_redirect(request)
    try:
        where, params = await _selection(
            web, principal, action=action, customer=customer, outcome=outcome, since=since
        )
    except PmsgateError as error:
        return error_page(request, principal, error)
    page = await web.audit.page(where, limit=PAGE_SIZE, after=after)
    older = (
        "/console/audit?" + urlencode({**params, "after": page.next_cursor})
        if page.next_cursor
        else None
    )
    return templates.TemplateResponse(
        request,
        "audit.html",
        {
            "principal": principal,
            "events": page.events,
            # A customer's user reads each event as a sentence (customer_view.event_text).
            "lines": None
            if principal.is_admin
            else [event_text(event, viewer=principal.email) for event in page.events],
            "filters": params,
            "outcomes": _OUTCOMES,
            "older": older,
            "first_page": not after,
            "export": "/console/audit/export.jsonl" + ("?" + urlencode(params) if params else ""),
            "export_csv": "/console/audit/export.csv" + ("?" + urlencode(params) if params else ""),
        },
        headers=PAGE_HEADERS,
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
    principal: MaybePrincipal,
    action: Text = None,
    customer: Text = None,
    outcome: Text = None,
    since: Text = None,
    export_format: Annotated[ExportFormat | None, Query(alias="format")] = None,
) -> Response:
    """The page's selection, streamed newest first: JSON lines (one event per line) or CSV.

    CSV with ``/console/audit/export.csv`` or ``format=csv``; same filters and scope.
    """
    if principal is None:
        return login_redirect(request)
    where, _ = await _selection(
        web, principal, action=action, customer=customer, outcome=outcome, since=since
    )
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
