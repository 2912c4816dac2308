"""A facility's tool-call log in the admin console: what did the assistant see?

- ``GET /console/customers/{student_id}/calls`` — the customer's facility's calls, newest
  first, fifty to a page (keyset: "older" follows the last row's cursor). Filters are query
  parameters, so a selection is bookmarkable: ``since`` and ``until`` (a day ``YYYY-MM-DD`` or
  a minute ``YYYY-MM-DDTHH:MM`` in the reader's time zone; ``until`` is included), ``tool``
  (a tool or operation name) and ``outcome`` (ok, stale, replayed, error). A bad value is a
  422 page naming what is allowed, never a 500. Each row says how fresh the answer was —
  fresh from the booking system, from the cache and how old, or stale (the booking system
  could not be asked) — since that is what the assistant based its reply on.
- ``GET /console/customers/{student_id}/calls.csv`` and ``calls.jsonl`` — the same selection,
  streamed newest first.

Admins only: a customer's login gets 403 (the log names keys and error codes the team reads,
not words for a property operator; docs/web.md). A customer's calls are only ever read
through its own facility, so no filter can reach another customer's.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from pmsgate import i18n
from pmsgate.catalogue.loader import load_tools
from pmsgate.errors import Forbidden, InvalidInput, NotFound
from pmsgate.gateway.call_log import OUTCOMES
from pmsgate.gateway.facilities import FacilityView
from pmsgate.integrations.kross.client import TOKEN_OPERATION
from pmsgate.integrations.kross.operations import load_operations
from pmsgate.storage.tool_calls import ToolCallFilter, ToolCallView
from pmsgate.web.connection_health import calls_path
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.pages import PagePrincipal, customer_path, render_page
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
MAX_VALUE = 100
PARAMETERS = ("since", "until", "tool", "outcome", "after")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_MINUTE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?")
OUTCOME_WORDS = {
    "ok": "answered",
    "stale": "stale answer",
    "replayed": "replayed write",
    "error": "error",
}
# A cell a spreadsheet would read as a formula starts with one of these: quoted with "'".
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CSV_COLUMNS = (
    "at",
    "local_time",
    "kind",
    "name",
    "transport",
    "key_label",
    "key_prefix",
    "outcome",
    "error_code",
    "status",
    "source",
    "age_s",
    "latency_ms",
    "arguments",
)


def known_names() -> list[str]:
    """The names a call can have: the catalogue's tools and the callable operations."""
    operations = [op.name for op in load_operations() if op.name != TOKEN_OPERATION]
    return sorted(load_tools()) + sorted(operations)


def _bad(name: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_call_log_parameter", hint=f"{name}: {hint}")


def _moment(name: str, value: str, *, end: bool) -> datetime:
    """A day or a minute in the reader's zone, as UTC; an end is the end of that day/minute."""
    zone = i18n.reader().zone
    try:
        if _DAY.fullmatch(value):
            day = datetime.fromisoformat(value).date()
            start = datetime.combine(day, time.min, tzinfo=zone)
            moment = start + timedelta(days=1) if end else start
        elif _MINUTE.fullmatch(value):
            local = datetime.fromisoformat(value).replace(tzinfo=zone)
            step = timedelta(seconds=1) if value.count(":") == 2 else timedelta(minutes=1)
            moment = local + step if end else local
        else:
            raise ValueError(value)
    except ValueError:
        raise _bad(
            name,
            f"{value[:40]!r} is not a day or a time.",
            "give a day YYYY-MM-DD or a time YYYY-MM-DDTHH:MM (your time zone).",
        ) from None
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class CallQuery:
    """The page's query string, checked: what to show and the parameters that repeat it."""

    since: datetime | None = None
    until: datetime | None = None
    tool: str | None = None
    outcome: str | None = None
    after: str | None = None
    shown: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, params: Mapping[str, str], names: Sequence[str]) -> CallQuery:
        """The query of ``params`` (unknown names ignored); a bad value is a 422."""
        values = {name: (params.get(name) or "").strip() for name in PARAMETERS}
        for name, value in values.items():
            if len(value) > MAX_VALUE:
                raise _bad(name, f"The {name} filter is too long.", "shorten it.")
        since = _moment("since", values["since"], end=False) if values["since"] else None
        until = _moment("until", values["until"], end=True) if values["until"] else None
        if since is not None and until is not None and until <= since:
            raise _bad("until", "The range ends before it starts.", "pick an end after the start.")
        tool = values["tool"] or None
        if tool is not None and tool not in names:
            raise _bad(
                "tool", f"There is no tool or operation {tool[:60]!r}.", "pick one from the list."
            )
        outcome = values["outcome"].lower() or None
        if outcome is not None and outcome not in OUTCOMES:
            raise _bad("outcome", f"The outcome is one of {', '.join(OUTCOMES)}.", "pick one.")
        shown = {
            name: value
            for name, value in (
                ("since", values["since"]),
                ("until", values["until"]),
                ("tool", tool or ""),
                ("outcome", outcome or ""),
            )
            if value
        }
        return cls(since, until, tool, outcome, values["after"] or None, shown)

    def where(self, facility_id: int) -> ToolCallFilter:
        """The repository's filter of this query for one facility."""
        return ToolCallFilter(
            facility_id=facility_id,
            since=self.since,
            until=self.until,
            name=self.tool,
            outcome=self.outcome,
        )


def freshness(call: ToolCallView) -> tuple[str, str]:
    """How fresh the answer was, in words, and its class: fresh, cached, stale or none."""
    if call.outcome == "error" or call.outcome == "replayed":
        return ("no answer" if call.outcome == "error" else "stored answer replayed", "none")
    age = _age_words(call.age_s)
    if call.outcome == "stale":
        return (f"STALE: last good answer, {age} old", "stale")
    if call.source == "upstream":
        return ("fresh from the booking system", "fresh")
    if call.source == "cache":
        return (f"cached, {age} old", "cached")
    return ("unknown", "none")


def _age_words(age_s: float | None) -> str:
    """``42 s``, ``1 min 35 s``, ``3 h 5 min``, ``2.5 days``: exact enough to compare."""
    if age_s is None:
        return "?"
    seconds = int(age_s)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    if seconds < 48 * 3600:
        hours, rest = divmod(seconds, 3600)
        return f"{hours} h {rest // 60} min"
    return f"{seconds / 86400:.1f} days"


async def _facility(web: WebServices, principal: Principal, student_id: str) -> FacilityView | None:
    """The customer's facility (None: none linked); 403 for a customer's login, 404 unknown."""
    if not principal.is_admin:
        raise Forbidden("Only an admin sees the tool-call log.")
    context = await web.customers.context(student_id)
    if context.hotel_id is None:
        return None
    try:
        return await web.gateway.facilities.get(context.hotel_id)
    except NotFound:
        return None


def _local_seconds(moment: datetime) -> str:
    return i18n.local(moment).strftime("%Y-%m-%d %H:%M:%S")


@router.get("/console/customers/{student_id}/calls", response_class=HTMLResponse)
async def call_log_page(
    request: Request, student_id: str, web: WebDep, principal: PagePrincipal
) -> Response:
    """The facility's tool-call log: filters, a page of calls, links to older ones and exports."""
    names = known_names()
    facility = await _facility(web, principal, student_id)
    query = CallQuery.parse(dict(request.query_params), names)
    base = calls_path(student_id)
    calls: list[ToolCallView] = []
    older = None
    if facility is not None:
        page = await web.gateway.gateway.call_log.page(
            query.where(facility.id), limit=PAGE_SIZE, after=query.after
        )
        calls = page.calls
        if page.next_cursor:
            older = base + "?" + urlencode({**query.shown, "after": page.next_cursor})
    suffix = "?" + urlencode(query.shown) if query.shown else ""
    return render_page(
        request,
        "admin_calls.html",
        {
            "principal": principal,
            "student_id": student_id,
            "facility": facility,
            "customer_link": customer_path(student_id),
            "calls_base": base,
            "calls": calls,
            "rows": [(call, *freshness(call)) for call in calls],
            "filters": query.shown,
            "names": names,
            "outcomes": OUTCOMES,
            "outcome_words": OUTCOME_WORDS,
            "older": older,
            "first_page": query.after is None,
            "newest": base + suffix,
            "export_csv": base + ".csv" + suffix,
            "export_jsonl": base + ".jsonl" + suffix,
            "local_seconds": _local_seconds,
            "retention_days": web.gateway.gateway.call_log.retention.days,
        },
    )


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _csv_line(cells: Sequence[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow([_cell(cell) for cell in cells])
    return buffer.getvalue()


def _csv_row(call: ToolCallView, reader: i18n.Reader) -> list[object]:
    plain = call.as_json()
    with i18n.use_locale(reader.language, reader.timezone, reader.now):
        plain["local_time"] = _local_seconds(call.at)
    plain["arguments"] = json.dumps(call.arguments, sort_keys=True) if call.arguments else ""
    return [plain[name] for name in CSV_COLUMNS]


@router.get("/console/customers/{student_id}/calls.csv")
@router.get("/console/customers/{student_id}/calls.jsonl")
async def call_log_export(
    request: Request, student_id: str, web: WebDep, principal: PagePrincipal
) -> Response:
    """The page's selection, newest first, as CSV or JSON lines (one call per line)."""
    facility = await _facility(web, principal, student_id)
    query = CallQuery.parse(dict(request.query_params), known_names())
    call_log = web.gateway.gateway.call_log
    name = "tool-calls-" + re.sub(
        r"[^A-Za-z0-9_-]", "", facility.hotel_id if facility else student_id
    )
    reader = i18n.reader()  # captured now: the rows are written while the response streams

    async def calls() -> AsyncIterator[ToolCallView]:
        if facility is None:
            return
        async for call in call_log.export(query.where(facility.id)):
            yield call

    if request.url.path.endswith(".csv"):

        async def csv_lines() -> AsyncIterator[str]:
            # A byte-order mark first, so a spreadsheet reads the file as UTF-8.
            yield "\ufeff" + _csv_line(CSV_COLUMNS)
            async for call in calls():
                yield _csv_line(_csv_row(call, reader))

        return StreamingResponse(
            csv_lines(),
            media_type="text/csv; charset=utf-8",
            headers={
                "Content-Disposition": f'attachment; filename="{name}.csv"',
                "Cache-Control": "no-store",
            },
        )

    async def json_lines() -> AsyncIterator[str]:
        async for call in calls():
            yield json.dumps(call.as_json(), ensure_ascii=False) + "\n"

    return StreamingResponse(
        json_lines(),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="{name}.jsonl"',
            "Cache-Control": "no-store",
        },
    )
