"""A bounded schemathesis run against the full app's OpenAPI (issue 12 item 3).

The app is the one ``pmsgate serve`` builds — the gateway, its admin API and the web
application — served in-process on the booking-system emulator, with a real facility,
gateway key and admin token, so authenticated routes are exercised past the key check.
Every documented operation gets positive and negative cases (a few each: bounded, and
derandomized so a failure reproduces); each answer must be no 5xx and exactly what the
document says (status, content type, body schema), and a schema-compliant request must
not be refused (schemathesis' ``positive_data_acceptance``: every bound the server
enforces is in the document). The one exception is a rule JSON Schema cannot state: the
order and length of a date range (``invalid_date_range``, docs/gateway.md). Runs on
SQLite and, under the postgres marker, on PostgreSQL (where a NUL or a 65-bit integer used
to be a 500).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from pydantic import SecretStr
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from pmsgate.app import create_app
from pmsgate.catalogue.loader import load_tools
from pmsgate.clock import SystemClock
from pmsgate.config import Settings
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.operations import PAYLOAD_MODELS
from pmsgate.gateway.tools import stay_date_years
from pmsgate.web.auth import CSRF_HEADER, SESSION_COOKIE
from tests.e2e.conftest import ADMIN_TOKEN

pytestmark = pytest.mark.anyio

MAX_EXAMPLES = 4  # per operation and generation mode: about 250 requests, well under 60 s
# The admin API is cheap to call (no upstream) and writes to the database: more cases.
MAX_ADMIN_EXAMPLES = 15
# Refusals of a rule between two values, which no JSON Schema keyword states (a date
# range's order and length): the only refusals of a schema-compliant request allowed.
# The budgets' order (per minute ≤ per hour ≤ per day) is such a rule too. And a refusal
# that is not about the request's shape at all: the booking system refusing the (generated)
# credentials a facility is verified with.
CROSS_FIELD_CODES = frozenset({"invalid_date_range", "invalid_limits", "pms_auth_failed"})


# Where every bound is stated so far: the gateway's tool and operation routes. The admin
# API and the web API still refuse some schema-compliant requests (docs/gateway.md).
ACCEPTANCE_CHECKED = ("/v1/", "/admin/", "/api/")


def schema_compliant_request_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
    """``positive_data_acceptance``, except a refusal of a cross-field rule."""
    if not case.operation.path.startswith(ACCEPTANCE_CHECKED):
        return None
    if response.status_code == 429:  # a budget used up: about time, not the request
        return None
    if response.status_code == 422:
        try:
            code = response.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = None
        if code in CROSS_FIELD_CODES:
            return None
    result: bool | None = positive_data_acceptance(ctx, response, case)
    return result


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    schema_compliant_request_accepted,
]
BASE_URL = "http://gateway.test"
WEB_ADMIN = "fuzz-admin@example.com"
WEB_PASSWORD = "a-long-enough-password-1"


def _httpx_kwargs(kwargs: dict[str, Any], credentials: dict[str, str]) -> dict[str, Any]:
    """A schemathesis case's (requests-style) arguments as httpx takes them, with
    ``credentials`` (headers) in place of whatever was generated under those names."""
    replaced = {name.lower() for name in credentials}
    headers = {k: v for k, v in (kwargs.get("headers") or {}).items() if k.lower() not in replaced}
    if any(k.lower() == "idempotency-key" for k in headers):
        # A new write, a new key (as a real caller does): a generated key is often "0", and
        # the same key with another body is rightly refused (idempotency_key_reused).
        headers = {k: v for k, v in headers.items() if k.lower() != "idempotency-key"}
        headers["Idempotency-Key"] = str(uuid.uuid4())
    cookies = kwargs.get("cookies")
    if cookies and "cookie" not in replaced:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    headers.update(credentials)
    # Generated header values may hold any character; on the wire a header is bytes.
    sent: dict[str, Any] = {
        "method": kwargs["method"],
        "url": kwargs["url"],
        "headers": {k: v.encode() if isinstance(v, str) else v for k, v in headers.items()},
        "params": kwargs.get("params"),
    }
    if "json" in kwargs:
        sent["json"] = kwargs["json"]
    data = kwargs.get("data")
    if isinstance(data, bytes | str):
        sent["content"] = data
    elif data is not None:
        sent["data"] = data
    if kwargs.get("files"):
        sent["files"] = kwargs["files"]
    return sent


def _credentials(path: str, key: str, session: str, csrf: str) -> dict[str, str]:
    """What a real caller of ``path`` sends: the admin token, a web session (not on sign-out,
    which would end it for the routes after), or the gateway key."""
    if path.startswith("/admin"):
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    if path == "/api/auth/logout":
        return {}
    if path.startswith("/api"):
        return {"Cookie": f"{SESSION_COOKIE}={session}", CSRF_HEADER: csrf}
    return {"Authorization": f"Bearer {key}"}


def _operations(app: Any) -> Iterator[Any]:
    schema = schemathesis.openapi.from_dict(app.openapi())
    for result in schema.get_all_operations():
        yield result.ok()


def _modes(operation: Any) -> tuple[GenerationMode, ...]:
    """Positive cases always; negative ones where something can be invalid within the bound.

    A free-text path parameter cannot be made invalid, and Hypothesis would spend ~10 s per
    operation learning so (a control character in a path is tested by hand instead:
    test_gateway_input_rules.py, tests/gateway/test_admin_api.py).
    """
    if "{" in operation.path:
        return (GenerationMode.POSITIVE,)
    return (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def _run_cases(
    operation: Any,
    mode: GenerationMode,
    credentials: dict[str, str],
    send: Any,
    known: dict[str, str],
) -> None:
    """A few derandomized cases of ``operation``, each sent and checked against the schema;
    path parameters named in ``known`` take that value (a random hotel_id only ever meets a
    404, the real one lets the body reach the database)."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_ADMIN_EXAMPLES if operation.path.startswith("/admin") else MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        for name, value in known.items():
            if case.path_parameters and name in case.path_parameters:
                case.path_parameters[name] = value
        kwargs = case.as_transport_kwargs(base_url=BASE_URL)
        response = anyio.from_thread.run(send, _httpx_kwargs(kwargs, credentials))
        case.validate_response(response, checks=CHECKS)

    check()


async def test_the_openapi_fuzzed_gets_no_5xx_and_only_documented_answers(
    gateway, facility, kross_store
) -> None:
    record, key = facility
    # Enough budget that fuzzing never meets the limiter (its 503 is no server error, but
    # not_a_server_error cannot tell): every other answer is the app's own.
    big = 10**6
    await gateway.services.facilities.set_limits(
        str(record["hotel_id"]), Limits(per_minute=big, per_hour=big, per_day=big)
    )
    # ... and the booking system's own limit: its 429 is no answer to the request's content.
    kross_store.set_limits(str(record["hotel_id"]), per_minute=big, per_hour=big, per_day=big)
    web = gateway.container.web
    failures: list[str] = []

    answered: Counter[tuple[str, int]] = Counter()

    async def send(kwargs: dict[str, Any]) -> httpx.Response:
        response = await gateway.http.request(**kwargs)
        answered[(httpx.URL(kwargs["url"]).path.split("/")[1], response.status_code)] += 1
        return response

    known = {"hotel_id": str(record["hotel_id"])}
    # A signed-in admin of the console, so the web API is exercised past its sign-in.
    await web.users.add(WEB_ADMIN, SecretStr(WEB_PASSWORD), role="admin")
    signed_in = await gateway.http.post(
        "/api/auth/login", json={"email": WEB_ADMIN, "password": WEB_PASSWORD}
    )
    session, csrf = signed_in.cookies[SESSION_COOKIE], signed_in.json()["csrfToken"]

    def fuzz() -> None:
        for operation in _operations(gateway.app):
            credentials = _credentials(operation.path, key, session, csrf)
            for mode in _modes(operation):
                try:
                    _run_cases(operation, mode, credentials, send, known)
                except Unsatisfiable:
                    continue  # nothing can be negative here (no parameters, no body)
                # Collect all, then fail once with every one (schemathesis reports the
                # failures of a case as a BaseExceptionGroup).
                except (Exception, BaseExceptionGroup) as error:
                    failures.append(f"{operation.label} [{mode.value}]: {error}")

    await anyio.to_thread.run_sync(fuzz)
    assert not failures, "\n\n".join(failures)
    # The keys worked: the fuzzing reached past authentication on the gateway and admin API.
    assert answered[("v1", 200)] and answered[("admin", 200)] and answered[("api", 200)], answered


def test_the_openapi_documents_each_tool_and_operation_body_and_the_error_envelope() -> None:
    document = create_app(Settings()).openapi()
    paths = document["paths"]
    envelope = {"$ref": "#/components/schemas/ErrorBody"}
    date_years = stay_date_years(SystemClock().now().date())

    for name, tool in load_tools().items():
        route = paths[f"/v1/tools/{name}"]["post"]
        body = route["requestBody"]["content"]["application/json"]["schema"]
        assert body == tool.openapi_schema(date_years)
    for name, model in PAYLOAD_MODELS.items():
        route = paths[f"/v1/operations/{name}"]["post"]
        schema = route["requestBody"]["content"]["application/json"]["schema"]
        assert schema["title"] == model.__name__
    assert not any(path.endswith(("{name}", "{path}")) for path in paths)  # only real names

    for path, routes in paths.items():
        for method, route in routes.items():
            for status in ("401", "413", "422", "429", "503"):
                answer = route["responses"][status]["content"]["application/json"]["schema"]
                assert answer == envelope, (method, path, status)
    assert "HTTPValidationError" not in document["components"]["schemas"]
