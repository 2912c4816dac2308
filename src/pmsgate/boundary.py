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

import json
import math
import re
from typing import Annotated, Any
from urllib.parse import unquote_plus

from pydantic import AfterValidator, WithJsonSchema
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
