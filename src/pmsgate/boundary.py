"""What every route refuses at the boundary, before anything is stored or sent upstream.

One rule set (docs/gateway.md, "Input rules"), checked by the same predicates wherever
input enters — the HTTP API, the admin API, the web console and its API, MCP:

- **Text** (a path, a query string, a JSON string or key, a form field) carries no
  control character (Unicode Cc: C0, DEL, C1) other than tab, line feed and carriage
  return, and no lone surrogate (PostgreSQL refuses a NUL, a surrogate is not
  encodable) → 422 ``invalid_characters``. E-mails and credentials refuse tab and line
  breaks too (their own codes: ``invalid_email``, ``invalid_username``...).
- **Integers** in a JSON body lie within signed 64 bits, narrower where a column is
  narrower (:data:`Int32` for the admin API's INTEGER columns) → 422
  ``integer_out_of_range``; a number written with more digits than any of them is
  refused before Python converts it. Non-finite numbers (``NaN``, ``1e999``) →
  422 ``number_out_of_range``.
- **Nesting** of arrays and objects at most :data:`MAX_JSON_DEPTH` → 422 ``json_too_deep``.

And the schemas state what the routes enforce (docs/gateway.md, "Inputs and their bounds"):
:func:`bounded_schema` gives every integer of a JSON Schema its 64-bit bounds and every date
the years it may lie in (:func:`date_pattern`), so a schema-compliant request is never refused
for a bound the document did not state.

Three ways to apply it:

- :func:`refuse_control_characters`, a dependency of the whole app, checks the path and
  the query string of every request;
- :data:`SafeText`, :data:`Int32` and :data:`Int64` are pydantic types for model fields
  and form parameters (their errors carry the codes above, see
  :func:`pmsgate.errors.install_error_handlers`);
- :func:`loads_json` / :func:`check_json` read and check a raw JSON body (tool arguments,
  operation payloads, MCP tool arguments).
"""

from __future__ import annotations

import calendar
import json
import math
import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import unquote_plus

from pydantic import AfterValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError
from starlette.requests import Request

from pmsgate.errors import (
    INTEGER_OUT_OF_RANGE,
    INVALID_CHARACTERS,
    JSON_TOO_DEEP,
    NUMBER_OUT_OF_RANGE,
    InvalidInput,
)

# Unicode categories Cc (C0 and C1 controls, DEL) and Cs (lone surrogates), as regexes:
# bodies hold up to tens of megabytes of base64 and a per-character loop would be slow.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL_BUT_WHITESPACE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# The deepest nesting of arrays and objects a body may have. Tool arguments and
# booking-system payloads are a few levels deep; a deeper body would only exhaust the
# parser's and the validators' recursion (a RecursionError, once a bare 500).
MAX_JSON_DEPTH = 32
# Digits (and sign) of the longest 64-bit integer: a longer literal is out of range.
_MAX_INT_CHARS = len(str(INT64_MIN))

_CHARACTERS_HINT = "Remove control characters (NUL, escape codes...); tab and line breaks are fine."


def has_control_characters(text: str, *, whitespace_ok: bool = False) -> bool:
    """Whether ``text`` holds a control character (Unicode Cc, NUL included) or a lone
    surrogate (Cs); with ``whitespace_ok``, tab, line feed and carriage return are fine
    (free text: JSON strings, names, labels). Strict for single tokens (e-mails, credentials).
    """
    pattern = _CONTROL_BUT_WHITESPACE if whitespace_ok else _CONTROL
    return pattern.search(text) is not None


def invalid_characters(where: str) -> InvalidInput:
    """The 422 for a control character in ``where``."""
    return InvalidInput(
        f"{where} contains a control character.", code=INVALID_CHARACTERS, hint=_CHARACTERS_HINT
    )


def integer_out_of_range(where: str, low: int = INT64_MIN, high: int = INT64_MAX) -> InvalidInput:
    """The 422 for an integer outside ``low … high`` in ``where``."""
    return InvalidInput(
        f"{where} is an integer outside {low} … {high}.",
        code=INTEGER_OUT_OF_RANGE,
        hint="Send an integer within the range the field accepts.",
    )


def _too_deep() -> InvalidInput:
    return InvalidInput(
        f"The body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep.",
        code=JSON_TOO_DEEP,
        hint=f"Send a JSON object nested at most {MAX_JSON_DEPTH} levels deep.",
    )


# --- pydantic types ----------------------------------------------------------------------------


def _safe_text(value: str) -> str:
    if has_control_characters(value, whitespace_ok=True):
        raise PydanticCustomError(INVALID_CHARACTERS, "must not contain control characters")
    return value


SafeText = Annotated[str, AfterValidator(_safe_text)]
"""Text without control characters (tab and line breaks allowed)."""


def _between(low: int, high: int) -> AfterValidator:
    def check(value: int) -> int:
        if not low <= value <= high:
            raise PydanticCustomError(
                INTEGER_OUT_OF_RANGE,
                "must be an integer from {low} to {high}",
                {"low": low, "high": high},
            )
        return value

    return AfterValidator(check)


def _schema(low: int, high: int) -> WithJsonSchema:
    return WithJsonSchema({"type": "integer", "minimum": low, "maximum": high})


Int32 = Annotated[int, _between(INT32_MIN, INT32_MAX), _schema(INT32_MIN, INT32_MAX)]
"""An integer a PostgreSQL INTEGER column stores."""
IdInt32 = Annotated[int, _between(INT32_MIN, INT32_MAX), _schema(1, INT32_MAX)]
"""A row id in an INTEGER column: stated from 1 (pair it with ``ge=1``, which refuses less)."""
Int64 = Annotated[int, _between(INT64_MIN, INT64_MAX), _schema(INT64_MIN, INT64_MAX)]
"""An integer a PostgreSQL BIGINT column (and every JSON consumer we call) stores."""


# --- raw JSON ------------------------------------------------------------------------------------


def _parse_int(literal: str) -> int:
    # Refused before conversion: Python will not even convert a literal of 4300+ digits.
    if len(literal) > _MAX_INT_CHARS or not INT64_MIN <= (value := int(literal)) <= INT64_MAX:
        raise integer_out_of_range("A number in the body")
    return value


def _not_finite(where: str) -> InvalidInput:
    return InvalidInput(
        f"{where} is not a finite number.", code=NUMBER_OUT_OF_RANGE, hint="Send finite numbers."
    )


def _parse_constant(literal: str) -> float:
    raise _not_finite(literal)


def loads_json(raw: bytes) -> Any:
    """``raw`` parsed as JSON and checked by :func:`check_json` (422s, never a 500)."""
    try:
        value = json.loads(raw, parse_int=_parse_int, parse_constant=_parse_constant)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidInput(
            "The body is not valid JSON.",
            code="invalid_json",
            hint="Send a JSON object with Content-Type: application/json.",
        ) from None
    except RecursionError:  # nested deeper than the parser's own recursion allows
        raise _too_deep() from None
    check_json(value)
    return value


def check_json(value: Any, where: str = "body") -> None:
    """Refuse ``value`` (parsed JSON) breaking a rule of this module; never recursive."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if isinstance(item, str):
            if has_control_characters(item, whitespace_ok=True):
                raise invalid_characters(at)
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                raise integer_out_of_range(at)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _not_finite(at)
        elif isinstance(item, dict | list):
            if depth + 1 > MAX_JSON_DEPTH:
                raise _too_deep()
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and has_control_characters(key, whitespace_ok=True):
                        raise invalid_characters(f"A key of {at}")
                    stack.append((child, f"{at}.{key}", depth + 1))
            else:
                stack.extend((child, f"{at}.{i}", depth + 1) for i, child in enumerate(item))


# --- every request -------------------------------------------------------------------------------


async def refuse_control_characters(request: Request) -> None:
    """An app-wide dependency: 422 ``invalid_characters`` for a path or query string with
    a control character, before any route runs (a path parameter or a query value reaches
    database lookups, where a NUL is a PostgreSQL error, and logs). Bodies are checked by
    the routes' own types.

    ``async`` although it never awaits: FastAPI runs a plain ``def`` dependency in its
    thread pool, a hand-off to a worker thread and back on every request (bench/README.md,
    production speed). The path checked is the scope's: what ``request.url.path`` gives
    without building a URL (they differ only in tab and line breaks, which are allowed)."""
    scope = request.scope
    query = unquote_plus(scope.get("query_string", b"").decode("latin-1"))
    for where, text in (("The path", scope["path"]), ("The query", query)):
        if has_control_characters(text, whitespace_ok=True):
            raise invalid_characters(where)


# --- what the schemas state --------------------------------------------------------------------

# Month and day of a valid date in any year (29 February only in leap years: see date_pattern).
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_TIME_OF_DAY = (
    "(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\\.[0-9]{1,6})?)?"
    "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?"
)


# Free text as a JSON Schema states the character rule (tab and line breaks allowed). The
# escapes read the same in ECMA-262 (OpenAPI) and Python regular expressions.
_CONTROL_CLASS = "\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f"
TEXT_PATTERN = f"^[^{_CONTROL_CLASS}]*$"
"""Text without control characters (:func:`has_control_characters` with whitespace_ok)."""
NOT_BLANK_TEXT_PATTERN = f"^[^{_CONTROL_CLASS}]*[^\\s{_CONTROL_CLASS}][^{_CONTROL_CLASS}]*$"
"""Such text with at least one character that is not white space."""


def text_pattern(also_refused: str = "") -> str:
    """:data:`NOT_BLANK_TEXT_PATTERN` refusing the characters ``also_refused`` too (a
    regular-expression class body, e.g. ``/\\\\`` for path separators)."""
    refused = _CONTROL_CLASS + also_refused
    return f"^[^{refused}]*[^\\s{refused}][^{refused}]*$"


def years_always_inside(year: int, back: int, ahead: int) -> tuple[int, int]:
    """The whole calendar years inside ``today - back years … today + ahead years`` on
    every day of ``year``: a schema stating them stays true all year, whatever the day."""
    return year - back + 1, year + ahead - 1


def _date_body(years: tuple[int, int]) -> str:
    first, last = years
    every = "|".join(str(y) for y in range(first, last + 1))
    leap = "|".join(str(y) for y in range(first, last + 1) if calendar.isleap(y))
    body = f"(?:{every})-{_MONTH_DAY}"
    return f"(?:{body}|(?:{leap})-02-29)" if leap else f"(?:{body})"


def date_pattern(years: tuple[int, int]) -> str:
    """A regular expression (ECMA-262 and Python alike) of the valid ``YYYY-MM-DD`` dates
    from the first to the last of ``years``, both included."""
    return f"^{_date_body(years)}$"


def datetime_pattern(years: tuple[int, int]) -> str:
    """As :func:`date_pattern`, for a date and time (``T`` or a space, minutes at least)."""
    return f"^{_date_body(years)}[T ]{_TIME_OF_DAY}$"


def bounded_schema(
    schema: Any, date_years: Callable[[str], tuple[int, int]], name: str = ""
) -> Any:
    """``schema`` (a JSON Schema, not changed) with the bounds the routes enforce stated:
    an integer without bounds gets the 64-bit ones (``minimum``/``maximum``), a ``date`` or
    ``date-time`` string the years ``date_years(property name)`` says it may lie in, as a
    ``pattern`` (in place of ``format``, which generators read as any year from 1 to 9999),
    and other text without a pattern :data:`TEXT_PATTERN` (no control characters)."""
    if isinstance(schema, list):
        return [bounded_schema(item, date_years, name) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {prop: bounded_schema(sub, date_years, prop) for prop, sub in value.items()}
        elif key in {"default", "examples", "const", "enum"}:
            out[key] = value
        else:
            out[key] = bounded_schema(value, date_years, name)
    if out.get("type") == "integer":
        if "minimum" not in out and "exclusiveMinimum" not in out:
            out["minimum"] = INT64_MIN
        if "maximum" not in out and "exclusiveMaximum" not in out:
            out["maximum"] = INT64_MAX
    if out.get("type") == "string" and out.get("format") in {"date", "date-time"}:
        pattern = date_pattern if out.pop("format") == "date" else datetime_pattern
        out["pattern"] = pattern(date_years(name))
    elif out.get("type") == "string" and not ({"pattern", "enum", "const", "format"} & set(out)):
        out["pattern"] = TEXT_PATTERN
    return out


# What the booking system's credentials look like (docs/kross-api.md): the rules
# pmsgate.integrations.kross.credentials checks (each with its own error code), and the
# statements of them in the request schemas that carry credentials, so that a generated
# client sends only what can pass.
HOTEL_ID_PATTERN = "^[0-9]+$"
API_USER_PATTERN = "^api[0-9]+$"
API_KEY_PATTERN = "^[0-9a-fA-F]{32}$"
MAX_API_PASSWORD = 256
"""Far above any real API password; bounds what one request can make us encrypt and send."""
HOTEL_ID_SCHEMA: dict[str, Any] = {"pattern": HOTEL_ID_PATTERN}
API_USER_SCHEMA: dict[str, Any] = {"pattern": API_USER_PATTERN}
API_PASSWORD_SCHEMA: dict[str, Any] = {
    # Not blank, and no control character at all (a tab or a line break is one here).
    "pattern": text_pattern("\\u0009\\u000a\\u000d"),
    "maxLength": MAX_API_PASSWORD,
}
API_KEY_SCHEMA: dict[str, Any] = {"pattern": API_KEY_PATTERN}


def api_user_field() -> Any:
    """The ``username`` field of a request body that carries booking-system credentials."""
    return Field(
        description="The API user, `api` followed by digits (not an e-mail).",
        json_schema_extra=API_USER_SCHEMA,
    )


def api_password_field() -> Any:
    """The ``password`` field of a request body that carries booking-system credentials."""
    return Field(description="The API user's password.", json_schema_extra=API_PASSWORD_SCHEMA)
