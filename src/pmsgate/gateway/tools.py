"""The catalogue's tools (docs/requirements.md R6): arguments checked, answers from cached reads.

Each tool is declared once, in ``catalogue/tools.yaml``; its ``answer`` names one of
the registered answers below (:data:`ANSWERS`, each an ``@answer("name")`` function),
which says how the answer is made from the shared reads. A declaration that names an
answer that does not exist, leaves out an option or a parameter it needs, or an answer
that no tool uses, fails at import (and in ``tests/gateway/test_tool_registry.py``).
See docs/extending.md, "How to add a tool".

The four tools over ``reservations/get-list`` share **one** cached reservation
window per facility (one upstream read serves them all); availability is cached
per range and instructions per apartment. Dates are always filtered here, never
trusted to the server (docs/requirements.md R8): ``meta.dropped_out_of_range`` counts the rows
the server returned outside what the tool asked for. Answers are made for a
language model: short, counted, ISO dates, no guest e-mail or phone.

Rows are read one by one (``pms.reservation_rows``): a malformed row is skipped and
counted (``meta.skipped_rows``), never a failed tool; what a row does not say is
answered as *unknown*, never as zero. The window is read in bounded pages
(``gateway.window``); a window cut short is served with ``meta.truncated``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import structlog
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    create_model,
)

from pmsgate.boundary import INT64_MAX, INT64_MIN, check_json, years_always_inside
from pmsgate.catalogue.loader import load_tools
from pmsgate.catalogue.tools import ToolDefinition
from pmsgate.errors import InvalidInput, NotFound
from pmsgate.gateway.cache import Cached
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.limiter import Priority
from pmsgate.gateway.rendered import (
    MAX_KEPT_BODY,
    Rendered,
    RenderedAnswers,
    record_meta,
    record_read,
)
from pmsgate.gateway.service import Gateway
from pmsgate.gateway.window import DEFAULT_PAGE_SIZE, Pages, WindowPolicy, read_pages
from pmsgate.integrations.kross import errors as kross_errors
from pmsgate.integrations.kross.dates import filter_availability, filter_by_stay
from pmsgate.integrations.kross.models import (
    BIRTH_DATE_FIELDS,
    BIRTH_DATE_YEARS_BACK,
    STAY_DATE_YEARS_AHEAD,
    STAY_DATE_YEARS_BACK,
    AvailabilityNight,
    CheckInInstructions,
    IsoDate,
    Reservation,
    insane_dates,
)
from pmsgate.integrations.kross.reservation_rows import (
    BOOKING_DATE_FORMAT,
    LIST_REQUEST_FIELDS,
    parse_rows,
    wire_field,
)

log = structlog.get_logger(__name__)

LIST_OPERATION = "reservations/get-list"
# Guest contact data is never cached by the tools: no answer uses it.
CONTACT_FIELDS = frozenset({"email", "phone"})
MAX_RANGE_DAYS = 60
# Availability is read for today … +90 days in one request (the booking system allows 366).
AVAILABILITY_WINDOW_DAYS = 90
STATUS_LABELS = {
    "CONF": "confirmed",
    "PEND": "pending",
    "CANC": "cancelled",
    "CHIN": "checked in",
    "CHOUT": "checked out",
}


class ToolAnswer(BaseModel):
    """What a tool returns: the data, and where it came from; shaped as the tool's declared
    answer model (``ToolDefinition.answer_model``, pmsgate.catalogue.tools)."""

    data: dict[str, Any]
    meta: dict[str, Any]


_TYPES: dict[str, Any] = {
    "string": StrictStr,
    "integer": StrictInt,
    "number": Annotated[float, Strict(), Field(allow_inf_nan=False)],
    "boolean": StrictBool,
}


def _argument_model(tool: ToolDefinition) -> type[BaseModel]:
    """The tool's arguments as a strict model: exactly what its input schema states.

    Strict: an integer is never a boolean, a float or a numeric string. ``null`` is a value
    only for a ``nullable`` parameter; an optional one is left out to mean "none" (its
    default, which pydantic does not validate), so ``{"date": null}`` is refused, not read
    as "tonight".
    """
    fields: dict[str, Any] = {}
    for name, parameter in tool.parameters.items():
        # IsoDate: a date is written YYYY-MM-DD (lax dates would read 0 as 1970-01-01).
        kind: Any = IsoDate if parameter.format == "date" else _TYPES[parameter.type]
        if parameter.type == "integer":
            low, high = parameter.minimum, parameter.maximum
            kind = Annotated[
                StrictInt,
                Field(ge=INT64_MIN if low is None else low, le=INT64_MAX if high is None else high),
            ]
        if parameter.max_length is not None:
            kind = Annotated[kind, Field(max_length=parameter.max_length)]
        if parameter.nullable:
            kind = kind | None
        default = ... if parameter.required else None
        fields[name] = (kind, Field(default=default))
    return create_model(f"{tool.name}-arguments", __config__=ConfigDict(extra="forbid"), **fields)


def stay_date_years(today: dt.date) -> Callable[[str], tuple[int, int]]:
    """The whole years a tool's or a stay's date may lie in on ``today``'s year, by name
    (:func:`pmsgate.integrations.kross.models.sane_date_range`: a birth date the last
    120 years, every other date 2 years back to 3 ahead); what the schemas state."""

    def years(name: str) -> tuple[int, int]:
        if name in BIRTH_DATE_FIELDS:
            return years_always_inside(today.year, BIRTH_DATE_YEARS_BACK, 0)
        return years_always_inside(today.year, STAY_DATE_YEARS_BACK, STAY_DATE_YEARS_AHEAD)

    return years


# What a cached read calls to fetch the value, at the priority it is given.
Fetch = Callable[[Priority], Awaitable[Any]]
AnswerFunction = Callable[["Tools", ToolDefinition, FacilityView, Any], Awaitable["ToolAnswer"]]


@dataclass(frozen=True)
class AnswerSpec:
    """A registered way of answering a tool: what it needs from the tool's declaration."""

    name: str
    make: AnswerFunction
    # option name → the values a declaration may give it (every option is required)
    options: Mapping[str, frozenset[str]]
    # the declaration must have every parameter of at least one of these sets
    parameters: tuple[frozenset[str], ...]
    # the booking-system operations it reads: a declaration's ``operation`` is one of them
    reads: frozenset[str]

    def problems(self, tool: ToolDefinition) -> list[str]:
        """What ``tool``'s declaration lacks, or gives wrongly, for this answer."""
        found: list[str] = []
        if tool.operation not in self.reads:
            found.append(
                f"tool {tool.name!r}: answer {self.name!r} reads {', '.join(sorted(self.reads))}, "
                f"not {tool.operation!r}"
            )
        for option, allowed in self.options.items():
            value = tool.answer_options.get(option)
            if value not in allowed:
                found.append(
                    f"tool {tool.name!r}: answer {self.name!r} needs answer_options.{option} "
                    f"set to one of {', '.join(sorted(allowed))} (got {value!r})"
                )
        for option in tool.answer_options:
            if option not in self.options:
                found.append(f"tool {tool.name!r}: answer {self.name!r} takes no option {option!r}")
        if self.parameters and not any(
            needed <= tool.parameters.keys() for needed in self.parameters
        ):
            wanted = " or ".join("+".join(sorted(needed)) for needed in self.parameters)
            found.append(f"tool {tool.name!r}: answer {self.name!r} needs the parameters {wanted}")
        return found


# Every way a tool can be answered, by name: the ``answer`` of a declaration in tools.yaml.
ANSWERS: dict[str, AnswerSpec] = {}


def answer(
    name: str,
    *,
    reads: Iterable[str],
    options: Mapping[str, Iterable[str]] | None = None,
    parameters: Iterable[Iterable[str]] = (),
) -> Callable[[AnswerFunction], AnswerFunction]:
    """Register the decorated function as the answer ``name`` (a name used twice fails)."""

    def register(make: AnswerFunction) -> AnswerFunction:
        if name in ANSWERS:
            raise ValueError(f"the answer {name!r} is registered twice")
        ANSWERS[name] = AnswerSpec(
            name=name,
            make=make,
            options={k: frozenset(v) for k, v in (options or {}).items()},
            parameters=tuple(frozenset(p) for p in parameters),
            reads=frozenset(reads),
        )
        return make

    return register


# Which reservations a ``reservation-list`` answer picks, for the days first … last.
_SELECTIONS: dict[str, Callable[[Reservation, dt.date, dt.date], bool]] = {
    # in the property on a night from first to last (first == last: that one night)
    "staying": lambda r, first, last: r.arrival <= last and first < r.departure,
    "arriving": lambda r, first, last: first <= r.arrival <= last,
    "departing": lambda r, first, last: first <= r.departure <= last,
}


class ToolRegistryError(ValueError):
    """A tool declaration and the registered answers disagree (a programming error)."""


def check_answers(tools: Iterable[ToolDefinition]) -> None:
    """Refuse declarations naming an unregistered answer, or giving it wrong options."""
    problems: list[str] = []
    for tool in tools:
        spec = ANSWERS.get(tool.answer)
        if spec is None:
            problems.append(
                f"tool {tool.name!r} names the answer {tool.answer!r}, which is not registered "
                f"in pmsgate.gateway.tools (registered: {', '.join(sorted(ANSWERS))})"
            )
        else:
            problems.extend(spec.problems(tool))
            if tool.answer_model() is None:
                problems.append(
                    f"tool {tool.name!r}: the answer {tool.answer!r} declares no model of its "
                    "answer (ANSWER_MODELS in pmsgate.catalogue.tools)"
                )
    if problems:
        raise ToolRegistryError("; ".join(problems))


def unused_answers(tools: Iterable[ToolDefinition]) -> list[str]:
    """The registered answers that none of ``tools`` uses (dead code)."""
    used = {tool.answer for tool in tools}
    return sorted(name for name in ANSWERS if name not in used)


class Tools:
    """Runs the catalogue's tools against one gateway."""

    def __init__(
        self,
        gateway: Gateway,
        max_age_s: Mapping[str, float] | None = None,
        default_max_age_s: float = 120.0,
        window: WindowPolicy | None = None,
        definitions: Mapping[str, ToolDefinition] | None = None,
    ) -> None:
        self.gateway = gateway
        self.window = window or WindowPolicy()
        # PMSGATE_CACHE_MAX_AGE_S: overrides of the declared bounds (existing deployments).
        self._max_age_s = dict(max_age_s or {})
        self._default_max_age_s = default_max_age_s
        self.definitions = dict(load_tools() if definitions is None else definitions)
        check_answers(self.definitions.values())
        self._models = {name: _argument_model(t) for name, t in self.definitions.items()}
        self._schemas: dict[tuple[str, int], dict[str, Any]] = {}
        self._rendered: RenderedAnswers | None = None

    def max_age_s(self, tool: str) -> float:
        """How old a cached answer this tool accepts: PMSGATE_CACHE_MAX_AGE_S, else the
        tool's declared ``cache_max_age_s``, else PMSGATE_CACHE_DEFAULT_MAX_AGE_S."""
        if tool in self._max_age_s:
            return self._max_age_s[tool]
        definition = self.definitions.get(tool)
        if definition is not None and definition.cache_max_age_s is not None:
            return definition.cache_max_age_s
        return self._default_max_age_s

    def input_schema(self, name: str) -> dict[str, Any]:
        """The tool's input schema with the date years accepted today (HTTP listing, MCP);
        made once a year per tool (the years change with the year only). Not to be changed."""
        year = self.today().year
        cached = self._schemas.get((name, year))
        if cached is None:
            cached = self.definitions[name].input_schema(stay_date_years(self.today()))
            self._schemas[(name, year)] = cached
        return cached

    def answer_model(self, name: str) -> type[BaseModel] | None:
        """The declared model of the tool's answer (its ``outputSchema`` over MCP, its 200 in
        /openapi.json): what every answer of it is (docs/gateway.md, Typed answers)."""
        return self.definitions[name].answer_model()

    def definition(self, name: str) -> ToolDefinition:
        """The tool of this name, or a 404 naming the available ones."""
        tool = self.definitions.get(name)
        if tool is None:
            raise NotFound(
                f"There is no tool named {name!r}.",
                code="unknown_tool",
                hint=f"Available tools: {', '.join(self.definitions)}.",
            )
        return tool

    def parse(self, name: str, arguments: dict[str, Any]) -> BaseModel:
        """Validated arguments, or a 422 that names each wrong field (the input rules of
        :mod:`pmsgate.boundary` first: MCP arguments arrive here without the HTTP body check)."""
        self.definition(name)
        check_json(arguments, "arguments")
        try:
            parsed = self._models[name].model_validate(arguments)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in error.errors()
            )
            raise InvalidInput(
                f"Invalid arguments for {name}: {problems}",
                code="invalid_arguments",
                hint="See GET /v1/tools for each parameter's format.",
            ) from None
        out_of_range = insane_dates(parsed, self.today())
        if out_of_range:
            raise InvalidInput(
                f"Invalid arguments for {name}: {'; '.join(out_of_range)}",
                code="invalid_arguments",
                hint=f"Dates must lie from {STAY_DATE_YEARS_BACK} years ago to "
                f"{STAY_DATE_YEARS_AHEAD} years ahead of today, written YYYY-MM-DD.",
            )
        return parsed

    async def call(
        self, facility: FacilityView, name: str, arguments: dict[str, Any]
    ) -> ToolAnswer:
        """Run one tool for a facility."""
        self.gateway.usage.tool_call(facility.hotel_id)
        parsed = self.parse(name, arguments)
        tool = self.definitions[name]
        result = await ANSWERS[tool.answer].make(self, tool, facility, parsed)
        if result.meta.get("stale"):
            self.gateway.metrics.stale_answers.labels(name).inc()
        return result

    # --- answers as HTTP bodies, kept per version of their reads (pmsgate.gateway.rendered) ---

    def _answers(self) -> RenderedAnswers:
        if self._rendered is None:
            fresh_hits = self.gateway.metrics.cache_hits.labels(stale="false")
            self._rendered = RenderedAnswers(
                self.gateway.cache,
                max_answers=self.gateway.cache.max_entries,
                refresh_ahead_ratio=self.gateway.policy.refresh_ahead_ratio,
                on_hit=fresh_hits.inc,
            )
        return self._rendered

    @property
    def kept_answers(self) -> int:
        """How many rendered answers this process keeps (at most PMSGATE_CACHE_MAX_ENTRIES)."""
        return 0 if self._rendered is None else len(self._rendered)

    def _kept_key(self, facility: FacilityView, name: str, body: bytes) -> tuple[Any, ...] | None:
        if len(body) > MAX_KEPT_BODY:
            return None
        return (facility.id, name, body, self.today())

    async def kept(self, facility: FacilityView, name: str, body: bytes) -> Rendered | None:
        """The answer to ``body`` (a request body) kept from an earlier call, when every read
        it was made from still stands (pmsgate.gateway.rendered); None otherwise."""
        key = self._kept_key(facility, name, body)
        if key is None or facility.status == "error":
            return None
        rendered = await self._answers().answer(key)
        if rendered is not None:
            self.gateway.usage.tool_call(facility.hotel_id)
        return rendered

    async def render(
        self, facility: FacilityView, name: str, arguments: dict[str, Any], body: bytes
    ) -> Rendered:
        """:meth:`call`, its answer rendered as an HTTP body and kept for the next ``body``."""

        async def make() -> tuple[dict[str, Any], dict[str, Any]]:
            answer = await self.call(facility, name, arguments)
            return answer.data, answer.meta

        key = self._kept_key(facility, name, body)
        return await self._answers().make(key, arguments, make)

    # --- shared reads -------------------------------------------------------------------

    async def cached_read(
        self, facility: FacilityView, key: str, *, max_age_s: float, fetch: Fetch
    ) -> Cached:
        """:meth:`Gateway.cached_read`, noted as one of the reads of the answer being made."""
        cached = await self.gateway.cached_read(facility, key, max_age_s=max_age_s, fetch=fetch)
        record_read(f"{facility.hotel_id}:{key}", max_age_s, cached)
        return cached

    def today(self) -> dt.date:
        return self.gateway.clock.now().date()

    async def _window(self, facility: FacilityView, tool: str) -> Cached:
        """The facility's reservations around today, one upstream read for four tools."""
        now = self.gateway.clock.now()
        today = now.date()
        policy = self.window
        low = today - dt.timedelta(days=policy.days_back)
        high = today + dt.timedelta(days=policy.days_ahead)

        async def fetch(priority: Priority) -> dict[str, Any]:
            op = self.gateway.operation(LIST_OPERATION)

            def wire(ours: str) -> str:
                return wire_field(op.request_fields, ours, LIST_REQUEST_FIELDS)

            # The only date filter public clients send is the booking (creation) date; the
            # stay dates are checked here whatever the server does (docs/requirements.md R8.1).
            booked_from = now - dt.timedelta(days=policy.booked_days)
            # A day ahead: the booking system may keep local time, and no booking is lost.
            booked_to = now + dt.timedelta(days=1)
            base = {
                wire("booked_from"): booked_from.strftime(BOOKING_DATE_FORMAT),
                wire("booked_to"): booked_to.strftime(BOOKING_DATE_FORMAT),
                wire("with_rooms"): True,
            }

            async def read_page(offset: int, limit: int) -> Any:
                body = {**base, wire("limit"): limit, wire("offset"): offset}
                return await self.gateway.read(facility, op.name, body, priority=priority)

            start = await self._minute_left(facility)

            async def spent() -> int:
                return start - await self._minute_left(facility)

            pages = await read_pages(
                read_page,
                page_size=op.page_size or DEFAULT_PAGE_SIZE,
                max_pages=policy.max_pages,
                permit_cap=policy.page_cap(facility.limits.per_minute),
                spent=spent,
                whole=priority is Priority.BACKGROUND,
            )
            reservations, skipped = _read_rows(facility, pages, op.response_fields)
            kept = filter_by_stay(reservations, low, high)
            if pages.truncated:
                log.warning(
                    "reservation_window_truncated",
                    hotel_id=facility.hotel_id,
                    reason=pages.reason,
                    pages=pages.pages,
                    rows=len(pages.rows),
                    total_count=pages.total_count,
                )
            return {
                "from": low.isoformat(),
                "to": high.isoformat(),
                "booked_from": base[wire("booked_from")],
                "rows": [_cacheable(r) for r in kept.items],
                "server_returned": kept.returned,
                "dropped_out_of_range": kept.dropped_out_of_range,
                "skipped_rows": skipped,
                "pages": pages.pages,
                "truncated": pages.truncated,
                "truncated_reason": pages.reason,
            }

        return await self.cached_read(
            facility, "reservations", max_age_s=self.max_age_s(tool), fetch=fetch
        )

    async def _minute_left(self, facility: FacilityView) -> int:
        left = await self.gateway.limiter.remaining(
            self.gateway.limit_key(facility), facility.limits
        )
        return left["minute"]

    async def reservations(
        self, facility: FacilityView, tool: str
    ) -> tuple[list[Reservation], Cached]:
        cached = await self._window(facility, tool)
        reservations: list[Reservation] = self.decode(
            facility, "reservations", cached.value, lambda value: parse_rows(value["rows"]).items
        )
        return reservations, cached

    def decode(self, facility: FacilityView, key: str, value: Any, parse: Any) -> Any:
        """``parse(value)`` of the cached answer of ``key``, once per cached version.

        Parsing a few hundred rows into models costs more than the whole cached call, and
        the cache hands out the same decoded object until the answer is fetched again. The
        parsed form is kept by the read cache with its entry (bounded, dropped with it:
        PMSGATE_CACHE_MAX_PARSED), never by the tools.
        """
        return self.gateway.parsed(facility, key, value, parse)

    async def one_reservation(
        self, facility: FacilityView, reservation_id: int, tool: str
    ) -> tuple[Reservation, Cached]:
        reservations, cached = await self.reservations(facility, tool)
        for reservation in reservations:
            if reservation.id_reservation == reservation_id:
                return reservation, cached

        async def fetch(priority: Priority) -> dict[str, Any]:
            op = self.gateway.operation(LIST_OPERATION)
            names = op.request_fields
            body = {
                wire_field(names, "reservation_id", LIST_REQUEST_FIELDS): reservation_id,
                wire_field(names, "with_rooms", LIST_REQUEST_FIELDS): True,
            }
            result = await self.gateway.read(facility, op.name, body, priority=priority)
            pages = Pages(rows=[(result.ruid, row) for row in _rows_of(result)], pages=1)
            reservations, skipped = _read_rows(facility, pages, op.response_fields)
            # The server may ignore the filter: only the asked reservation is kept.
            matches = [r for r in reservations if r.id_reservation == reservation_id]
            return {"rows": [_cacheable(r) for r in matches[:1]], "skipped_rows": skipped}

        single = await self.cached_read(
            facility,
            f"reservation:{reservation_id}",
            max_age_s=self.max_age_s(tool),
            fetch=fetch,
        )
        rows = parse_rows(single.value["rows"]).items
        if not rows:
            raise NotFound(
                f"Reservation {reservation_id} does not exist in this facility.",
                code="reservation_not_found",
                hint="Check the reservation number in the booking details.",
            )
        return rows[0], single


# --- the registered answers (tools.yaml `answer`) ---------------------------------------


@answer(
    "availability",
    reads=["calendar/get-availability"],
    parameters=[("arrival", "departure", "apartment_id")],
)
async def availability(
    tools: Tools, tool: ToolDefinition, facility: FacilityView, args: Any
) -> ToolAnswer:
    """Which apartments are free for a stay, night by night, with the stay's price."""
    arrival, departure = args.arrival, args.departure
    _check_range(arrival, departure, "arrival", "departure", exclusive_end=True)
    last_night = departure - dt.timedelta(days=1)
    today = tools.today()
    window_end = today + dt.timedelta(days=AVAILABILITY_WINDOW_DAYS - 1)
    if today <= arrival and last_night <= window_end:
        # Guests ask for their own dates: one cached window answers every range inside it,
        # so a new range costs no permit (a per-range cache missed almost every time).
        payload: dict[str, Any] = {
            "date_from": today.isoformat(),
            "date_to": window_end.isoformat(),
        }
        key = f"availability:window:{today.isoformat()}"
    else:
        payload = {"date_from": arrival.isoformat(), "date_to": last_night.isoformat()}
        if args.apartment_id is not None:
            payload["id_room_type"] = args.apartment_id
        scope = args.apartment_id or "all"
        key = f"availability:{payload['date_from']}:{payload['date_to']}:{scope}"

    async def fetch(priority: Priority) -> dict[str, Any]:
        result = await tools.gateway.read(facility, tool.operation, payload, priority=priority)
        rows, skipped = _availability_rows(facility, result.data, result.ruid)
        return {"rows": rows, "skipped_rows": skipped}

    cached = await tools.cached_read(
        facility, key, max_age_s=tools.max_age_s(tool.name), fetch=fetch
    )

    def parse(value: Any) -> list[AvailabilityNight]:
        return [AvailabilityNight.model_validate(r) for r in value["rows"]]

    # The shared window is parsed once per version; a range outside it, each time
    # (remembering every such range would grow without bound).
    in_window = key.startswith("availability:window:")
    nights: list[AvailabilityNight] = (
        tools.decode(facility, key, cached.value, parse) if in_window else parse(cached.value)
    )
    # Rows outside what was asked of the server are dropped and counted (docs/requirements.md R8.2);
    # the stay's nights are then taken from what is left.
    asked = filter_availability(
        nights,
        dt.date.fromisoformat(payload["date_from"]),
        dt.date.fromisoformat(payload["date_to"]),
    )
    stay = [n for n in asked.items if arrival <= n.date <= last_night]
    stay_nights = (departure - arrival).days
    by_apartment: dict[int, list[AvailabilityNight]] = {}
    for night in stay:
        if args.apartment_id is None or night.id_room_type == args.apartment_id:
            by_apartment.setdefault(night.id_room_type, []).append(night)
    apartments = []
    for apartment_id, rows in sorted(by_apartment.items()):
        free = [r for r in rows if r.rooms_available > 0]
        prices = [r.price for r in rows if r.price is not None]
        min_stay = max((r.min_stay or 1) for r in rows)
        apartments.append(
            {
                "apartment_id": apartment_id,
                "apartment": rows[0].name_room_type,
                "available": len(free) == stay_nights and stay_nights >= min_stay,
                "nights_free": len(free),
                "nights_asked": stay_nights,
                "min_stay": min_stay,
                "total_price": round(sum(prices), 2) if len(prices) == stay_nights else None,
                "currency": rows[0].currency,
            }
        )
    available = [a for a in apartments if a["available"]]
    return ToolAnswer(
        data={
            "arrival": arrival.isoformat(),
            "departure": departure.isoformat(),
            "nights": stay_nights,
            "available_count": len(available),
            "apartments": apartments,
        },
        meta=_meta(cached, count=len(apartments), dropped=asked.dropped_out_of_range),
    )


@answer("reservation-status", reads=[LIST_OPERATION], parameters=[("reservation_id",)])
async def reservation_status(
    tools: Tools, tool: ToolDefinition, facility: FacilityView, args: Any
) -> ToolAnswer:
    """One reservation described: status, dates, apartment, channel, payments."""
    reservation, cached = await tools.one_reservation(facility, args.reservation_id, tool.name)
    return ToolAnswer(
        data={"reservation": _describe(reservation)},
        meta=_meta(cached, count=1, dropped=0),
    )


@answer(
    "reservation-list",
    reads=[LIST_OPERATION],
    options={"select": _SELECTIONS},
    parameters=[("date",), ("date_from", "date_to")],
)
async def reservation_list(
    tools: Tools, tool: ToolDefinition, facility: FacilityView, args: Any
) -> ToolAnswer:
    """The reservations of the window that ``answer_options.select`` picks, cancelled excluded.

    With a ``date`` parameter the tool asks about one day (today when left out); with
    ``date_from`` and ``date_to``, about a range (today and seven days on by default).
    ``select`` says which reservations: ``staying`` (in the property on a night of it),
    ``arriving`` or ``departing`` (arrival or departure day in it).
    """
    single = "date" in tool.parameters
    if single:
        first = last = args.date or tools.today()
    else:
        first = args.date_from or tools.today()
        last = args.date_to or first + dt.timedelta(days=7)
        _check_range(first, last, "date_from", "date_to", exclusive_end=False)
    reservations, cached = await tools.reservations(facility, tool.name)
    picks = _SELECTIONS[tool.answer_options["select"]]
    picked = [r for r in reservations if picks(r, first, last)]
    rows = [r for r in picked if r.cod_reservation_status != "CANC"]
    data: dict[str, Any] = (
        {"date": first.isoformat()}
        if single
        else {"date_from": first.isoformat(), "date_to": last.isoformat()}
    )
    data["count"] = len(rows)
    data["reservations"] = [_brief(r) for r in rows]
    return ToolAnswer(
        data=_with_window_note(data, cached),
        meta=_meta(cached, count=len(rows), dropped=len(reservations) - len(picked)),
    )


@answer("incomplete-portals", reads=[LIST_OPERATION], parameters=[("date_from", "date_to")])
async def incomplete_portals(
    tools: Tools, tool: ToolDefinition, facility: FacilityView, args: Any
) -> ToolAnswer:
    """Arrivals whose check-in portal is not complete, and those whose status is unknown."""
    first = args.date_from or tools.today()
    last = args.date_to or first + dt.timedelta(days=7)
    _check_range(first, last, "date_from", "date_to", exclusive_end=False)
    reservations, cached = await tools.reservations(facility, tool.name)
    in_range = [r for r in reservations if first <= r.arrival <= last]
    dropped = len(reservations) - len(in_range)
    live = [r for r in in_range if r.cod_reservation_status != "CANC"]
    # A row without a portal status is not "complete": it is unknown, and counted apart.
    unknown = [r for r in live if r.portal_status is None]
    rows = [r for r in live if r.portal_status is not None and r.portal_status != "complete"]
    data: dict[str, Any] = {
        "date_from": first.isoformat(),
        "date_to": last.isoformat(),
        "count": len(rows),
        "unknown": len(unknown),
        "reservations": [{**_brief(r), "portal": _portal(r)} for r in rows],
        "unknown_reservations": [{**_brief(r), "portal": _portal(r)} for r in unknown],
    }
    if unknown:
        data["note"] = (
            f"The booking system gave no check-in portal status for {len(unknown)} of "
            f"these arrivals: whether their portal is complete is unknown (count covers "
            "only the arrivals whose status is known)."
        )
    return ToolAnswer(
        data=_with_window_note(data, cached),
        meta={**_meta(cached, count=len(rows), dropped=dropped), "unknown": len(unknown)},
    )


@answer("portal-status", reads=[LIST_OPERATION], parameters=[("reservation_id",)])
async def portal_status(
    tools: Tools, tool: ToolDefinition, facility: FacilityView, args: Any
) -> ToolAnswer:
    """Whether one reservation's online check-in portal is complete (or unknown)."""
    reservation, cached = await tools.one_reservation(facility, args.reservation_id, tool.name)
    portal = _portal(reservation)
    known = portal["status"] != "unknown"
    data: dict[str, Any] = {
        "reservation_id": reservation.id_reservation,
        # None, not False: without a status nobody knows whether it is complete.
        "complete": portal["status"] == "complete" if known else None,
        "portal": portal,
    }
    if not known:
        data["note"] = (
            "The booking system gave no check-in portal status for this reservation: "
            "whether it is complete is unknown."
            + (" The portal link is given." if portal.get("link") else "")
        )
    return ToolAnswer(
        data=data, meta={**_meta(cached, count=1, dropped=0), "unknown": int(not known)}
    )


@answer(
    "checkin-instructions",
    reads=["get-check-in-instructions"],
    parameters=[("reservation_id", "apartment_id")],
)
async def checkin_instructions(
    tools: Tools, tool: ToolDefinition, facility: FacilityView, args: Any
) -> ToolAnswer:
    """An apartment's check-in instructions, by apartment or by a reservation's apartment."""
    apartment_id = args.apartment_id
    if apartment_id is None and args.reservation_id is None:
        raise InvalidInput(
            f"{tool.name} needs reservation_id or apartment_id.",
            code="invalid_arguments",
            hint="Give the guest's reservation number, or the apartment's identifier.",
        )
    if apartment_id is None:
        reservation, _ = await tools.one_reservation(facility, args.reservation_id, tool.name)
        apartment_id = next((r.id_room_type for r in reservation.rooms if r.id_room_type), None)
        if apartment_id is None:
            raise NotFound(
                f"Reservation {args.reservation_id} has no apartment assigned yet.",
                code="apartment_not_assigned",
                hint="Ask the operator which apartment the guest will stay in.",
            )

    async def fetch(priority: Priority) -> dict[str, Any]:
        result = await tools.gateway.read(
            facility,
            tool.operation,
            {"id_room_type": apartment_id},
            priority=priority,
        )
        return {"instructions": result.data or {}}

    cached = await tools.cached_read(
        facility,
        f"instructions:{apartment_id}",
        max_age_s=tools.max_age_s(tool.name),
        fetch=fetch,
    )
    instructions = CheckInInstructions.model_validate(cached.value["instructions"])
    return ToolAnswer(
        data={
            "apartment_id": instructions.id_room_type or apartment_id,
            "apartment": instructions.name_room_type,
            "address": instructions.address,
            "check_in_from": instructions.check_in_from,
            "check_in_until": instructions.check_in_until,
            "check_out_until": instructions.check_out_until,
            "instructions": instructions.instructions,
        },
        meta=_meta(cached, count=1, dropped=0),
    )


def _rows_of(result: Any) -> list[Any]:
    data = result.data if result.data is not None else []
    return data if isinstance(data, list) else [data]


def _availability_rows(
    facility: FacilityView, data: Any, ruid: str | None
) -> tuple[list[dict[str, Any]], int]:
    """The readable nights of an availability answer, and how many rows were skipped.

    Like reservation rows, one unreadable night never fails the tool: it is skipped,
    counted in ``meta.skipped_rows`` and logged by field location (no values).
    """
    if data is None:
        return [], 0
    if not isinstance(data, list):
        raise kross_errors.UnexpectedResponse(
            f"calendar/get-availability answered {type(data).__name__} data, not a list.",
            operation="calendar/get-availability",
            ruid=ruid,
        )
    rows: list[dict[str, Any]] = []
    skipped = 0
    for row in data:
        try:
            night = AvailabilityNight.model_validate(row)
        except ValidationError as error:
            skipped += 1
            log.warning(
                "availability_row_skipped",
                hotel_id=facility.hotel_id,
                ruid=ruid,
                fields=sorted({".".join(str(p) for p in e["loc"]) for e in error.errors()})[:5],
            )
            continue
        rows.append(night.model_dump(mode="json"))
    return rows, skipped


def _read_rows(
    facility: FacilityView, pages: Pages, response_fields: Mapping[str, str]
) -> tuple[list[Reservation], int]:
    """The readable rows of what paging collected, each skipped row logged; and how many."""
    reservations: list[Reservation] = []
    skipped = 0
    for ruid, row in pages.rows:
        parsed = parse_rows([row], response_fields)
        reservations.extend(parsed.items)
        for problem in parsed.problems:
            # Field locations only, never values: the rows hold guests' personal data.
            if problem.skipped:
                skipped += 1
                log.warning(
                    "reservation_row_skipped",
                    hotel_id=facility.hotel_id,
                    ruid=ruid,
                    fields=list(problem.fields),
                )
            else:
                log.info(
                    "reservation_fields_ignored",
                    hotel_id=facility.hotel_id,
                    ruid=ruid,
                    fields=list(problem.fields),
                )
    return reservations, skipped


def _cacheable(reservation: Reservation) -> dict[str, Any]:
    return reservation.model_dump(mode="json", exclude=set(CONTACT_FIELDS))


def _check_range(
    first: dt.date, last: dt.date, first_name: str, last_name: str, *, exclusive_end: bool
) -> None:
    if last < first or (exclusive_end and last == first):
        raise InvalidInput(
            f"{last_name} must be after {first_name}.",
            code="invalid_date_range",
            hint="Write dates as year-month-day; the end comes after the start.",
        )
    if (last - first).days > MAX_RANGE_DAYS:
        raise InvalidInput(
            f"The range from {first_name} to {last_name} is longer than {MAX_RANGE_DAYS} days.",
            code="invalid_date_range",
            hint=f"Ask for at most {MAX_RANGE_DAYS} days at a time.",
        )


def _meta(cached: Cached, *, count: int, dropped: int) -> dict[str, Any]:
    record_meta(cached)  # the answer's age is this read's (pmsgate.gateway.rendered)
    value = cached.value if isinstance(cached.value, dict) else {}
    meta: dict[str, Any] = {
        "source": cached.source,
        "age_s": round(cached.age_s, 1),
        "stale": cached.stale,
        "count": count,
        "dropped_out_of_range": dropped,
        "skipped_rows": int(value.get("skipped_rows") or 0),
        "truncated": bool(value.get("truncated")),
    }
    if meta["truncated"]:
        meta["truncated_reason"] = value.get("truncated_reason")
    return meta


def _with_window_note(data: dict[str, Any], cached: Cached) -> dict[str, Any]:
    """``data`` with a plain note when the window was read only in part."""
    if isinstance(cached.value, dict) and cached.value.get("truncated"):
        data["complete"] = False
        data["window_note"] = (
            "The booking system's reservation list could only be read in part "
            f"({cached.value.get('truncated_reason')}); reservations may be missing here."
        )
    return data


def _apartment(reservation: Reservation) -> str | None:
    names = [r.name_room_type for r in reservation.rooms if r.name_room_type]
    return ", ".join(names) or None


def _brief(reservation: Reservation) -> dict[str, Any]:
    return {
        "reservation_id": reservation.id_reservation,
        "status": STATUS_LABELS.get(reservation.cod_reservation_status or "", "unknown"),
        "arrival": reservation.arrival.isoformat(),
        "departure": reservation.departure.isoformat(),
        "apartment": _apartment(reservation),
        "guests": sum(r.qt_guests or 0 for r in reservation.rooms) or None,
        "language": reservation.lang,
    }


def _portal(reservation: Reservation) -> dict[str, Any]:
    portal = reservation.guest_portal
    status = reservation.portal_status
    if portal is None or status is None:
        # Unknown: nothing about guests or missing items may be claimed, only the link.
        return {"status": "unknown", "link": reservation.link}
    return {
        "status": status,
        "guests_registered": portal.guests_registered,
        "guests_expected": portal.guests_expected,
        "missing": portal.missing,
        "link": reservation.link,
    }


def _describe(reservation: Reservation) -> dict[str, Any]:
    paid = reservation.paid
    total = reservation.total_amount
    return {
        **_brief(reservation),
        "nights": (reservation.departure - reservation.arrival).days,
        "channel": reservation.channel,
        "total_amount": total,
        # None when the booking system lists no payments: unknown, not "nothing paid".
        "paid": paid,
        "balance": round(total - paid, 2) if total is not None and paid is not None else None,
        "currency": reservation.currency,
        "portal_status": _portal(reservation)["status"],
        "portal_link": reservation.link,
    }


def _check_packaged_catalogue() -> None:
    """Fail the import when tools.yaml and the registered answers disagree, either way."""
    packaged = load_tools().values()
    check_answers(packaged)
    unused = unused_answers(packaged)
    if unused:
        raise ToolRegistryError(
            f"registered answers no tool of tools.yaml uses: {', '.join(unused)} "
            "(declare a tool with it, or delete it)"
        )


_check_packaged_catalogue()
