"""The tools (``tools.yaml``) as typed definitions, and the custom tool each becomes.

A tool's declaration is the one place it is written: the gateway serves every
declared tool (its ``/v1/tools/NAME`` route, its OpenAPI entry and its MCP tool
come from ``input_schema``, ``parameters`` and ``description``), answers it with
the registered answer its ``answer`` names (``pmsgate.gateway.tools.ANSWERS``)
and caches it for its ``cache_max_age_s``; onboarding creates one custom tool per
definition on the assistant platform (``custom_tool_body``), whose code is the
catalogue's one shared template rendered with the tool's name
(``custom_tool_code``). See docs/extending.md, "How to add a tool".

A tool's answer is declared here too: each registered answer's model (:data:`ANSWER_MODELS`,
``{"data", "meta"}`` exactly as the gateway sends it), which ``/openapi.json`` names as the
route's 200 answer and MCP lists as the tool's ``outputSchema`` (docs/gateway.md, "Typed
answers"). The models document; the answers are made as plain JSON by
``pmsgate.gateway.tools`` and checked against them by the test suite (and by MCP, whose
``structuredContent`` must match the listed schema).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pmsgate.boundary import INT64_MAX, INT64_MIN, bounded_schema
from pmsgate.openapi import sometimes

# docs/requirements.md R6.2: these six are always there (more may be declared), in the order
# onboarding creates them (docs/requirements.md R21.6).
SPEC_TOOL_NAMES = (
    "check-availability",
    "check-portal-status",
    "get-checkin-instructions",
    "get-reservation-status",
    "get-in-house-guests",
    "get-incomplete-portals",
)

# The years a date parameter may lie in, by the parameter's name.
DateYears = Callable[[str], tuple[int, int]]

# The template's assignments replaced per tool; each must appear exactly once.
_TEMPLATE_CONSTANTS = ("TOOL_NAME", "URL_SECRET", "KEY_SECRET", "TIMEOUT_S")
_SECRET_NAME = r"^[A-Z][A-Z0-9_]{2,63}$"


# --- what the tools answer (docs/gateway.md, "Typed answers") -----------------------------

# Why a reservation window was read only in part (pmsgate.gateway.window.TruncatedReason).
TruncatedReason = Literal[
    "budget_share", "page_limit", "offset_ignored", "page_repeated", "budget_exhausted", "upstream"
]
# A reservation's status in words (pmsgate.gateway.tools.STATUS_LABELS, or "unknown").
StatusLabel = Literal["confirmed", "pending", "cancelled", "checked in", "checked out", "unknown"]


class _Answer(BaseModel):
    # Exactly the fields the gateway sends (additionalProperties: false): an answer that
    # grows a field fails the tests until it is declared here.
    model_config = ConfigDict(extra="forbid", frozen=True)


class AnswerMeta(_Answer):
    """Where a tool's answer came from and how fresh it is."""

    source: Literal["upstream", "cache"] = Field(
        description="upstream: read from the booking system for this call; cache: a kept read."
    )
    age_s: float = Field(description="Seconds since the answer's read was made.")
    stale: bool = Field(
        description="True when the booking system could not be asked and this is the last good "
        "answer (age_s says how old)."
    )
    count: int = Field(ge=0, description="How many items the answer lists.")
    dropped_out_of_range: int = Field(
        ge=0, description="Rows the booking system returned outside what was asked (filtered out)."
    )
    skipped_rows: int = Field(
        ge=0, description="Rows the booking system sent that could not be read (left out)."
    )
    truncated: bool = Field(description="True when the reservation window was read only in part.")
    truncated_reason: TruncatedReason = sometimes(
        "Why the window was read only in part; only when truncated is true."
    )


class PortalMeta(AnswerMeta):
    """Where a check-in portal answer came from, with the unknown statuses counted."""

    unknown: int = Field(
        ge=0, description="Reservations whose portal status the booking system did not give."
    )


class _WindowNote(_Answer):
    complete: bool = sometimes(
        "false when the reservation window was read only in part (reservations may be "
        "missing); left out otherwise."
    )
    window_note: str = sometimes("Says, in words, that the window was read only in part.")


class ApartmentAvailability(_Answer):
    """One apartment (room type) over the nights of the stay."""

    apartment_id: int = Field(description="The apartment's (room type's) identifier.")
    apartment: str | None = Field(description="The apartment's name, when given.")
    available: bool = Field(description="Free every night of the stay, and long enough.")
    nights_free: int = Field(ge=0)
    nights_asked: int = Field(ge=0)
    min_stay: int = Field(description="The longest minimum stay of its nights.")
    total_price: float | None = Field(
        description="The stay's price; null unless every night has a price."
    )
    currency: str | None


class StayAvailability(_Answer):
    """Which apartments are free for a stay."""

    arrival: dt.date
    departure: dt.date
    nights: int
    available_count: int = Field(ge=0)
    apartments: list[ApartmentAvailability]


class ReservationBrief(_Answer):
    """A reservation in brief (never the guest's e-mail or phone)."""

    reservation_id: int
    status: StatusLabel
    arrival: dt.date
    departure: dt.date
    apartment: str | None = Field(description="The apartments' names, comma-separated.")
    guests: int | None = Field(description="Guests of its rooms; null when not given.")
    language: str | None


class ReservationDetail(ReservationBrief):
    """A reservation described: dates, apartment, channel, payments and portal."""

    nights: int
    channel: str | None
    total_amount: float | None
    paid: float | None = Field(description="Null when the booking system lists no payments.")
    balance: float | None = Field(description="total_amount - paid; null when either is.")
    currency: str | None
    portal_status: str = Field(description="The check-in portal's status, or unknown.")
    portal_link: str | None


class Portal(_Answer):
    """A reservation's online check-in portal; an unknown status carries only the link."""

    status: str = Field(description="The booking system's status (complete, ...), or unknown.")
    guests_registered: int | None = sometimes("Left out when the status is unknown.")
    guests_expected: int | None = sometimes("Left out when the status is unknown.")
    missing: list[str] = sometimes("What is still missing; left out when the status is unknown.")
    link: str | None


class ReservationWithPortal(ReservationBrief):
    """A reservation in brief with its check-in portal."""

    portal: Portal


class ReservationsOnNight(_WindowNote):
    """The reservations of one night (cancelled excluded)."""

    date: dt.date
    count: int = Field(ge=0)
    reservations: list[ReservationBrief]


class ReservationsInRange(_WindowNote):
    """The reservations of a range of days (cancelled excluded)."""

    date_from: dt.date
    date_to: dt.date
    count: int = Field(ge=0)
    reservations: list[ReservationBrief]


class IncompletePortals(_WindowNote):
    """Arrivals whose check-in portal is incomplete, and those whose status is unknown."""

    date_from: dt.date
    date_to: dt.date
    count: int = Field(ge=0, description="Arrivals whose portal is known to be incomplete.")
    unknown: int = Field(ge=0, description="Arrivals whose portal status is unknown.")
    reservations: list[ReservationWithPortal]
    unknown_reservations: list[ReservationWithPortal]
    note: str = sometimes("Says, in words, that some statuses are unknown; only then.")


class PortalStatus(_Answer):
    """Whether one reservation's check-in portal is complete."""

    reservation_id: int
    complete: bool | None = Field(description="Null when the status is unknown.")
    portal: Portal
    note: str = sometimes("Says, in words, that the status is unknown; only then.")


class ReservationStatus(_Answer):
    """One reservation described."""

    reservation: ReservationDetail


class ApartmentInstructions(_Answer):
    """An apartment's check-in instructions."""

    apartment_id: int
    apartment: str | None
    address: str | None
    check_in_from: str | None
    check_in_until: str | None
    check_out_until: str | None
    instructions: str | None


class StayAvailabilityAnswer(_Answer):
    """A tool's answer made by availability: data and meta."""

    data: StayAvailability
    meta: AnswerMeta


class ReservationStatusAnswer(_Answer):
    """A tool's answer made by reservation-status: data and meta."""

    data: ReservationStatus
    meta: AnswerMeta


class ReservationsOnNightAnswer(_Answer):
    """A tool's answer made by reservation-list about one night (a date parameter)."""

    data: ReservationsOnNight
    meta: AnswerMeta


class ReservationsInRangeAnswer(_Answer):
    """A tool's answer made by reservation-list about a range (date_from, date_to)."""

    data: ReservationsInRange
    meta: AnswerMeta


class IncompletePortalsAnswer(_Answer):
    """A tool's answer made by incomplete-portals: data and meta."""

    data: IncompletePortals
    meta: PortalMeta


class PortalStatusAnswer(_Answer):
    """A tool's answer made by portal-status: data and meta."""

    data: PortalStatus
    meta: PortalMeta


class ApartmentInstructionsAnswer(_Answer):
    """A tool's answer made by checkin-instructions: data and meta."""

    data: ApartmentInstructions
    meta: AnswerMeta


# The model of each registered answer (``answer`` in tools.yaml), by name.
ANSWER_MODELS: dict[str, type[BaseModel]] = {
    "availability": StayAvailabilityAnswer,
    "reservation-status": ReservationStatusAnswer,
    "reservation-list": ReservationsInRangeAnswer,
    "incomplete-portals": IncompletePortalsAnswer,
    "portal-status": PortalStatusAnswer,
    "checkin-instructions": ApartmentInstructionsAnswer,
}
# An answer shaped by a parameter of its tool: (answer, parameter) → its model then. A
# reservation list asks about one night with a `date`, else about a range.
ANSWER_MODELS_BY_PARAMETER: dict[tuple[str, str], type[BaseModel]] = {
    ("reservation-list", "date"): ReservationsOnNightAnswer,
}


@cache
def answer_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON Schema, self-contained (``$defs``), as MCP lists it; made once. Not
    to be changed."""
    return model.model_json_schema(mode="serialization")


class ToolParameter(BaseModel):
    """One parameter of a tool; the description explains the format in words.

    The parameter's JSON Schema is what the gateway enforces, no more and no less
    (docs/gateway.md, "Inputs and their bounds"): an integer is a JSON integer (never a
    boolean or a numeric string) within ``minimum`` … ``maximum`` (64 bits when not
    declared), and ``null`` is a value only for a ``nullable`` parameter — leaving an
    optional parameter out is how a caller says "none".
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["string", "integer", "number", "boolean"]
    required: bool = False
    # Required, but its quality ("in words") is the lint's job, so a short one is reported
    # together with every other problem instead of stopping the load at the first.
    description: str
    format: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = Field(default=None, ge=1)
    nullable: bool = False

    @model_validator(mode="after")
    def _bounds_fit_the_type(self) -> ToolParameter:
        if (self.minimum is not None or self.maximum is not None) and self.type != "integer":
            raise ValueError("minimum and maximum are for integer parameters")
        if self.max_length is not None and self.type != "string":
            raise ValueError("max_length is for string parameters")
        low = INT64_MIN if self.minimum is None else self.minimum
        high = INT64_MAX if self.maximum is None else self.maximum
        if not INT64_MIN <= low <= high <= INT64_MAX:
            raise ValueError("minimum … maximum must be an interval within 64 bits")
        return self

    def json_schema(self) -> dict[str, Any]:
        """This parameter as a JSON Schema property."""
        schema: dict[str, Any] = {
            "type": [self.type, "null"] if self.nullable else self.type,
            "description": self.description,
        }
        if self.format:
            schema["format"] = self.format
        if self.type == "integer":
            schema["minimum"] = INT64_MIN if self.minimum is None else self.minimum
            schema["maximum"] = INT64_MAX if self.maximum is None else self.maximum
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        return schema

    def assistant_schema(self) -> dict[str, Any]:
        """This parameter as the assistant platform wants it: {type, required, description}."""
        return {"type": self.type, "required": self.required, "description": self.description}


class CustomToolSettings(BaseModel):
    """How every custom tool reaches the gateway (``custom_tool`` in ``tools.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Literal["python"]
    # A file name in the catalogue directory, never a path elsewhere.
    template: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    url_secret: str = Field(pattern=_SECRET_NAME)
    key_secret: str = Field(pattern=_SECRET_NAME)
    timeout_s: float = Field(gt=0, le=120)

    @model_validator(mode="after")
    def _two_secrets(self) -> CustomToolSettings:
        if self.url_secret == self.key_secret:
            raise ValueError("url_secret and key_secret must be two different secrets")
        return self


class CustomToolRuntime(BaseModel):
    """The custom-tool settings with the template's source text, ready to render."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    settings: CustomToolSettings
    template_source: str = Field(repr=False)

    @model_validator(mode="after")
    def _renderable(self) -> CustomToolRuntime:
        for constant in _TEMPLATE_CONSTANTS:
            found = len(re.findall(rf"^{constant} = .*$", self.template_source, re.MULTILINE))
            if found != 1:
                raise ValueError(
                    f"the template {self.settings.template} must assign {constant} exactly "
                    f"once at the start of a line (found {found})"
                )
        if not re.search(r"^def main\(\*\*params", self.template_source, re.MULTILINE):
            raise ValueError(f"the template {self.settings.template} defines no main(**params)")
        compile(self.template_source, self.settings.template, "exec")
        return self

    def render(self, tool_name: str) -> str:
        """The template's source with this tool's name and the configured secrets."""
        values: dict[str, Any] = {
            "TOOL_NAME": tool_name,
            "URL_SECRET": self.settings.url_secret,
            "KEY_SECRET": self.settings.key_secret,
            "TIMEOUT_S": float(self.settings.timeout_s),
        }
        source = self.template_source
        for constant, value in values.items():
            # json.dumps writes a valid Python literal for str and float, quotes escaped.
            found = re.search(rf"^{constant} = .*$", source, re.MULTILINE)
            if found is None:  # refused when the runtime was built; kept for mypy
                raise ValueError(f"the template lost its {constant} assignment")
            line = f"{constant} = {json.dumps(value)}"
            source = source[: found.start()] + line + source[found.end() :]
        return source


class ToolDefinition(BaseModel):
    """A named gateway tool over one booking-system operation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    operation: str
    kind: Literal["read", "write"]
    description: str = Field(min_length=1)
    # What the platform shows while the tool runs.
    execution_message_description: str = Field(min_length=1, max_length=120)
    parameters: dict[str, ToolParameter]
    # At least one of these parameters must be given (none: no such rule). Stated in the
    # OpenAPI body (``anyOf``), not in the MCP input schema: model APIs refuse a tool schema
    # with a top-level anyOf, so there it is said in the descriptions.
    requires_any_of: list[str] = Field(default_factory=list)
    # How the answer is made: the name of a registered answer (pmsgate.gateway.tools.ANSWERS),
    # and the options that answer takes (e.g. which reservations a list selects).
    answer: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    answer_options: dict[str, str] = Field(default_factory=dict)
    # Freshness bound of the tool's cached reads, in seconds; PMSGATE_CACHE_MAX_AGE_S may
    # override it per tool, and without either PMSGATE_CACHE_DEFAULT_MAX_AGE_S applies.
    cache_max_age_s: float | None = Field(default=None, ge=0)
    # Set by the catalogue loader (not written in tools.yaml): what the code is made from.
    custom_tool: CustomToolRuntime | None = Field(default=None, repr=False, exclude=True)

    @field_validator("name")
    @classmethod
    def _kebab_case(cls, name: str) -> str:
        if len(name) > 64 or not all(part.isalnum() and part.islower() for part in name.split("-")):
            raise ValueError(f"tool name {name!r} must be kebab-case, at most 64 characters")
        return name

    @model_validator(mode="after")
    def _declared_alternatives(self) -> ToolDefinition:
        unknown = [name for name in self.requires_any_of if name not in self.parameters]
        if unknown:
            raise ValueError(f"requires_any_of names no parameter: {', '.join(unknown)}")
        return self

    def input_schema(self, date_years: DateYears | None = None) -> dict[str, Any]:
        """The parameters as one JSON Schema object (for HTTP listings and MCP).

        With ``date_years`` (the years a date parameter may lie in, by parameter name) the
        schema states them (:func:`pmsgate.boundary.bounded_schema`): a ``pattern`` in place
        of ``format: date``. The gateway always passes them: they are what it enforces.
        """
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {name: p.json_schema() for name, p in self.parameters.items()},
            "required": [name for name, p in self.parameters.items() if p.required],
            "additionalProperties": False,
        }
        if date_years is None:
            return schema
        bounded: dict[str, Any] = bounded_schema(schema, date_years)
        return bounded

    def answer_model(self) -> type[BaseModel] | None:
        """The model of this tool's answer (:data:`ANSWER_MODELS`); None when its answer has
        none declared (the gateway refuses such a tool: pmsgate.gateway.tools.check_answers)."""
        for (answer, parameter), model in ANSWER_MODELS_BY_PARAMETER.items():
            if answer == self.answer and parameter in self.parameters:
                return model
        return ANSWER_MODELS.get(self.answer)

    def openapi_schema(self, date_years: DateYears | None = None) -> dict[str, Any]:
        """:meth:`input_schema` with what only the HTTP body states (``requires_any_of``)."""
        schema = self.input_schema(date_years)
        if self.requires_any_of:
            schema["anyOf"] = [{"required": [name]} for name in self.requires_any_of]
        return schema

    def custom_tool_code(self) -> str:
        """The Python source of this tool's custom tool (the shared template, rendered)."""
        return self._runtime().render(self.name)

    def custom_tool_body(self, workspace_id: str) -> dict[str, Any]:
        """The assistant platform's ``POST /v1/custom-tools`` body for this tool."""
        runtime = self._runtime()
        return {
            "workspace_id": workspace_id,
            "name": self.name,
            "description": self.description,
            "language": runtime.settings.language,
            "code": runtime.render(self.name),
            "parameters": {name: p.assistant_schema() for name, p in self.parameters.items()},
            "execution_message_description": self.execution_message_description,
            "enable_globally": True,
        }

    def _runtime(self) -> CustomToolRuntime:
        if self.custom_tool is None:
            raise ValueError(
                f"tool {self.name!r} was not loaded through the catalogue; "
                "use load_catalogue().tools"
            )
        return self.custom_tool


class ToolsFile(BaseModel):
    """The shape of ``tools.yaml``."""

    model_config = ConfigDict(extra="forbid")

    custom_tool: CustomToolSettings
    tools: dict[str, ToolDefinition]

    @model_validator(mode="before")
    @classmethod
    def _names_from_keys(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and isinstance(raw.get("tools"), dict):
            raw = {
                **raw,
                "tools": {
                    name: {"name": name, **body} if isinstance(body, dict) else body
                    for name, body in raw["tools"].items()
                },
            }
        return raw

    @field_validator("tools")
    @classmethod
    def _the_six_of_the_spec(cls, tools: dict[str, ToolDefinition]) -> dict[str, ToolDefinition]:
        missing = [n for n in SPEC_TOOL_NAMES if n not in tools]
        if missing:
            raise ValueError(
                f"the catalogue must define the six standard tools (missing: {', '.join(missing)})"
            )
        return tools
