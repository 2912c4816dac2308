"""The booking-system client: one call, one HTTP request, one typed outcome.

Wire contract: ``docs/kross-api.md``. The client resolves every operation
through the :class:`~pmsgate.integrations.kross.operations.OperationTable` first, so an
operation that does not exist or is out of scope is refused before any I/O.
Failed answers are classified by ``errors.yaml`` (data) into the classes of
``pms.errors``. It never retries (the gateway owns retries, limits and token
rotation), with one exception that is not a retry: an answer "no such
operation" sends the same request once to each next path of the operation
(``Operation.paths``), since nothing was applied; the path that answers is used
from then on. It never writes a token, password or api key into a log line or
an exception. Each HTTP request it sends is logged (``kross_request``) and, when an
``observer`` is given, reported to it with its outcome and duration (the gateway's
``pmsgate_upstream_request_seconds``).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
import structlog
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from pmsgate.clock import Clock, SystemClock
from pmsgate.config import Settings
from pmsgate.integrations.kit import NOT_SENT, ErrorKind, Scrubber, deadline, parse_retry_after
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.errors import (
    CALL,
    CLASSIFICATION,
    TOKEN_REQUEST,
    HtmlInsteadOfJson,
    InvalidRequest,
    KrossError,
    TokenRejected,
    UnexpectedResponse,
    UnknownOperation,
    UpstreamUnavailable,
    WriteOutcomeUnknown,
    request_outcome,
)
from pmsgate.integrations.kross.models import WirePayload
from pmsgate.integrations.kross.operations import Operation, OperationTable, load_operations

log = structlog.get_logger(__name__)

TOKEN_OPERATION = "auth/get-token"
DEFAULT_TOKEN_TTL = timedelta(days=7)
BROWSER_UA_PREFIX = "Mozilla/5.0"
_MESSAGE_MAX = 200
# The edge protection's plain-text answer, e.g. "error code: 1010".
_EDGE_CODE = re.compile(r"^error code:\s*(\d+)\b", re.IGNORECASE)

BeforeAttempt = Callable[[], Awaitable[None]]
# Told of every HTTP request sent: the operation, its outcome (errors.REQUEST_OUTCOMES) and
# its duration in seconds. The gateway passes its metrics' histogram; integrations never
# import the gateway.
RequestObserver = Callable[[str, str, float], None]

# Our message for each kind of errors.yaml (never the upstream's text).
_MESSAGES: dict[ErrorKind, str] = {
    ErrorKind.AUTH_FAILED: "The booking system refused the credentials.",
    ErrorKind.TOKEN_REJECTED: "The booking system rejected the bearer token.",
    ErrorKind.FORBIDDEN: "The booking system refused access.",
    ErrorKind.EDGE_BLOCKED: "The edge protection blocked the request (error 1010).",
    ErrorKind.UNKNOWN_OPERATION: "The booking system has no such operation at this path.",
    ErrorKind.NOT_FOUND: "The booking system has no such object.",
    ErrorKind.INVALID_REQUEST: "The booking system refused the request.",
    ErrorKind.CONFLICT: "The booking system refused a conflicting request.",
    ErrorKind.RATE_LIMITED: "The booking system is rate limiting this facility.",
    ErrorKind.TOO_MANY_SESSIONS: "The facility has too many active tokens for a new one.",
    ErrorKind.UNAVAILABLE: "The booking system failed",
    ErrorKind.UNEXPECTED: "The booking system answered unexpectedly.",
}
# Kinds that, on an HTML page, mean the page did not come from the API itself.
_NOT_FROM_THE_API = frozenset(
    {ErrorKind.INVALID_REQUEST, ErrorKind.NOT_FOUND, ErrorKind.CONFLICT, ErrorKind.UNEXPECTED}
)

M = TypeVar("M", bound=BaseModel)


class Token(BaseModel):
    """A bearer token and the moment it stops being valid (UTC)."""

    model_config = ConfigDict(frozen=True)

    value: SecretStr
    expires_at: datetime

    def is_expired(self, now: datetime) -> bool:
        """True when the token is no longer valid at ``now``."""
        return now >= self.expires_at


@dataclass(frozen=True)
class KrossResult:
    """A successful answer: the ``data`` and the list envelope around it."""

    operation: str
    data: Any
    ruid: str | None = None
    count: int | None = None
    total_count: int | None = None
    limit: int | None = None
    offset: int | None = None

    def one(self, model: type[M]) -> M:
        """``data`` parsed as one ``model``; UnexpectedResponse when it does not fit."""
        try:
            return model.model_validate(self.data)
        except ValidationError as exc:
            raise self._shape_error(model, exc) from None

    def many(self, model: type[M]) -> list[M]:
        """``data`` parsed as a list of ``model``; UnexpectedResponse when it does not fit."""
        if not isinstance(self.data, list):
            raise UnexpectedResponse(
                f"Expected a list in data, got {type(self.data).__name__}.",
                operation=self.operation,
                ruid=self.ruid,
            )
        try:
            return [model.model_validate(row) for row in self.data]
        except ValidationError as exc:
            raise self._shape_error(model, exc) from None

    def _shape_error(self, model: type[BaseModel], exc: ValidationError) -> UnexpectedResponse:
        # Field locations only: values may be guest personal data.
        where = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})[:5]
        return UnexpectedResponse(
            f"data does not match {model.__name__} at {where}.",
            operation=self.operation,
            ruid=self.ruid,
        )


class KrossClient:
    """Speaks Kross Booking API v5 over the given ``httpx.AsyncClient``."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        operations: OperationTable,
        user_agent: str,
        clock: Clock,
        timeout_s: float = 20.0,
        observer: RequestObserver | None = None,
    ) -> None:
        self._http = http
        self.observer = observer
        self.base_url = base_url.rstrip("/")
        self.operations = operations
        self.user_agent = user_agent
        self.clock = clock
        self.timeout_s = timeout_s
        # Which path each operation goes to, for this base URL, for every facility: the
        # upstream's layout is the same for everyone. One client per process (the
        # composition root's) remembers it from the first "no such operation" answer on.
        self._in_use: dict[str, str] = {}
        self._answered_on: dict[str, str] = {}
        # hotel_id → where its last login answer carried the token (for `pmsgate doctor`).
        self._token_places: dict[str, str] = {}
        if not user_agent.startswith(BROWSER_UA_PREFIX):
            # Sent anyway so the fault is visible as pms_edge_blocked, but say why up front.
            log.warning("kross_user_agent_not_browser_style", expected_prefix=BROWSER_UA_PREFIX)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        http: httpx.AsyncClient,
        clock: Clock | None = None,
        *,
        observer: RequestObserver | None = None,
    ) -> KrossClient:
        """A client configured from PMSGATE_* settings (base URL, path overrides, UA, timeout)."""
        return cls(
            http,
            base_url=settings.kross_base_url,
            operations=load_operations(settings.kross_paths),
            user_agent=settings.user_agent,
            clock=clock or SystemClock(),
            timeout_s=settings.kross_timeout_s,
            observer=observer,
        )

    async def get_token(self, credentials: Credentials) -> Token:
        """Obtain a new bearer token (``auth/get-token``); every call opens a session upstream."""
        operation = self.operations.resolve(TOKEN_OPERATION)
        secrets = (
            credentials.password.get_secret_value(),
            credentials.api_key.get_secret_value(),
        )
        body = await self._exchange(
            operation,
            credentials.token_request_body(),
            path=operation.path,
            bearer=None,
            secrets=secrets,
            context=TOKEN_REQUEST,
        )
        value, holder, source = _find_token(body)
        if value is None:
            raise UnexpectedResponse(
                "The token answer carries no auth_token (looked in data, top level, data.data).",
                operation=operation.name,
                ruid=_ruid(body),
            )
        if source is not None:
            self._token_places[credentials.hotel_id] = source
        return Token(value=SecretStr(value), expires_at=self._expiry(holder, body))

    async def call(
        self,
        operation: str,
        payload: Mapping[str, Any] | WirePayload,
        token: Token | str,
        *,
        before_attempt: BeforeAttempt | None = None,
    ) -> KrossResult:
        """Send one operation with a bearer token and return its data envelope.

        ``before_attempt`` runs before every HTTP request this call makes (the gateway
        takes a limiter permit there): normally one, one more per alternate path tried
        after a "no such operation" answer.
        """
        op = self.operations.resolve(operation)
        if op.name == TOKEN_OPERATION:
            raise ValueError("auth/get-token is sent by get_token(), never by call().")
        body = payload.to_wire() if isinstance(payload, WirePayload) else dict(payload)
        bearer = self._bearer(op, token)
        answer = await self._on_paths(op, body, bearer, before_attempt)
        if "data" not in answer:
            raise UnexpectedResponse(
                "The answer has no data field.", operation=op.name, ruid=_ruid(answer)
            )
        return KrossResult(
            operation=op.name,
            data=answer.get("data"),
            ruid=_ruid(answer),
            count=_int_or_none(answer.get("count")),
            total_count=_int_or_none(answer.get("total_count")),
            limit=_int_or_none(answer.get("limit")),
            offset=_int_or_none(answer.get("offset")),
        )

    def url_for(self, operation: Operation, path: str | None = None) -> str:
        """The absolute URL an operation is POSTed to (its current path unless ``path``)."""
        return f"{self.base_url}/v5/{path or self.path_in_use(operation)}"

    def path_in_use(self, operation: Operation) -> str:
        """The path the next request of ``operation`` goes to first."""
        return self._in_use.get(operation.name, operation.path)

    def token_place(self, hotel_id: str) -> str | None:
        """Where the facility's last login answer in this process carried the token.

        ``data`` (``data.auth_token``), ``top`` (a top-level ``auth_token``) or ``nested``
        (``data.data.auth_token``); None when no login happened in this process.
        """
        return self._token_places.get(hotel_id)

    def resolved_paths(self) -> dict[str, str]:
        """Operation name → the path it answered on in this process (a fallback shows here)."""
        return dict(self._answered_on)

    # --- paths --------------------------------------------------------------------------

    async def _on_paths(
        self,
        op: Operation,
        body: dict[str, Any],
        bearer: str,
        before_attempt: BeforeAttempt | None,
    ) -> dict[str, Any]:
        """Send on the path in use; after "no such operation", once on each next path."""
        paths = op.paths
        start = self.path_in_use(op)
        first = paths.index(start) if start in paths else 0
        order = [*paths[first:], *paths[:first]]
        not_found: UnknownOperation | None = None
        for index, path in enumerate(order):
            if index:
                log.warning(
                    "kross_path_fallback", operation=op.name, path=path, after=order[index - 1]
                )
            if before_attempt is not None:
                await before_attempt()
            try:
                answer = await self._exchange(
                    op, body, path=path, bearer=bearer, secrets=(bearer,), context=CALL
                )
            except UnknownOperation as error:
                # "No such operation": nothing was applied here, so even a write may go to the
                # next path. The next request starts there too (no retry pays for this twice).
                not_found = not_found or error
                self._in_use[op.name] = order[(index + 1) % len(order)]
                continue
            except InvalidRequest:
                # Refused for its content: the operation exists at this path.
                self._remember(op, path)
                raise
            self._remember(op, path)
            return answer
        assert not_found is not None
        raise not_found

    def _remember(self, op: Operation, path: str) -> None:
        self._in_use[op.name] = path
        if self._answered_on.get(op.name) != path:
            self._answered_on[op.name] = path
            if path != op.path:
                log.info("kross_path_resolved", operation=op.name, path=path, default=op.path)

    def _bearer(self, op: Operation, token: Token | str) -> str:
        if isinstance(token, Token):
            if token.is_expired(self.clock.now()):
                # Known dead: do not spend a request on it, the caller refreshes first.
                raise TokenRejected("The token has expired.", operation=op.name)
            return token.value.get_secret_value()
        if not token:
            raise TokenRejected("No token was given.", operation=op.name)
        return token

    # --- one request --------------------------------------------------------------------

    async def _exchange(
        self,
        op: Operation,
        body: dict[str, Any],
        *,
        path: str,
        bearer: str | None,
        secrets: tuple[str, ...],
        context: str,
    ) -> dict[str, Any]:
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        started = time.perf_counter()
        try:
            response = await self._post(op, path, body, headers)
        except KrossError as exc:
            self._finished(op, path, started, status=None, ruid=None, error=exc)
            raise
        try:
            answer = self._interpret(op, response, Scrubber(secrets, limit=_MESSAGE_MAX), context)
        except KrossError as exc:
            self._finished(op, path, started, status=response.status_code, ruid=exc.ruid, error=exc)
            raise
        self._finished(
            op, path, started, status=response.status_code, ruid=_ruid(answer), error=None
        )
        return answer

    async def _post(
        self, op: Operation, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        url = self.url_for(op, path)
        try:
            with deadline(self.timeout_s):
                return await self._http.post(
                    url, json=body, headers=headers, timeout=httpx.Timeout(self.timeout_s)
                )
        except NOT_SENT as exc:
            raise UpstreamUnavailable(
                f"Could not reach the booking system ({type(exc).__name__}).",
                operation=op.name,
                may_have_been_sent=False,
            ) from None
        except (httpx.TransportError, TimeoutError) as exc:
            reason = type(exc).__name__
            if op.replay_safe:
                raise UpstreamUnavailable(
                    f"The booking system did not answer ({reason}).", operation=op.name
                ) from None
            raise WriteOutcomeUnknown(
                f"The write was sent but no answer came ({reason}); it may have been applied.",
                operation=op.name,
            ) from None

    def _interpret(
        self, op: Operation, response: httpx.Response, scrub: Scrubber, context: str
    ) -> dict[str, Any]:
        status = response.status_code
        answer = _json_object(response)
        if answer is None:
            raise self._non_json_error(op, response, context)
        code = _error_code(answer.get("error_code"))
        if code is None and 200 <= status < 300:
            return answer
        # An error code makes any answer an error, a 200 included: never data.
        raise self._error(
            op,
            context,
            status=status,
            upstream_code=code,
            upstream_message=scrub(answer.get("error_message")),
            ruid=_ruid(answer),
            headers=response.headers,
        )

    def _non_json_error(self, op: Operation, response: httpx.Response, context: str) -> KrossError:
        status = response.status_code
        text = response.text
        content_type = response.headers.get("content-type", "").lower()
        looks_html = "html" in content_type or text.lstrip()[:15].lower().startswith(
            ("<!doctype", "<html")
        )
        if 200 <= status < 300:
            if looks_html:
                return HtmlInsteadOfJson(
                    f"The booking system answered HTML (HTTP {status}) instead of JSON.",
                    operation=op.name,
                    status=status,
                )
            return UnexpectedResponse(
                f"The booking system answered a non-JSON body (HTTP {status}).",
                operation=op.name,
                status=status,
            )
        # The edge's plain-text "error code: 1010" is the one code a non-JSON answer carries.
        edge = None if looks_html else _EDGE_CODE.match(text.strip()[:100])
        error = self._error(
            op,
            context,
            status=status,
            upstream_code=edge.group(1) if edge else None,
            upstream_message=None,
            ruid=None,
            headers=response.headers,
        )
        if looks_html and error.kind in _NOT_FROM_THE_API:
            # An HTML page refusing the request's content comes from something in front of the
            # API (a proxy, the reference site), not from the operation.
            return HtmlInsteadOfJson(
                f"The booking system answered HTML (HTTP {status}) instead of JSON.",
                operation=op.name,
                status=status,
                kind=error.kind,
            )
        return error

    def _error(
        self,
        op: Operation,
        context: str,
        *,
        status: int,
        upstream_code: str | None,
        upstream_message: str | None,
        ruid: str | None,
        headers: httpx.Headers,
    ) -> KrossError:
        """The error class of a failed answer, as ``errors.yaml`` classifies it."""
        kind = CLASSIFICATION.classify(status, upstream_code, context=context)
        error_class, message = KrossError.for_kind(kind), _MESSAGES[kind]
        if kind is ErrorKind.UNAVAILABLE:
            message = f"{message} (HTTP {status})."
            if status == 504 and not op.replay_safe:
                # A gateway timeout means the origin may still have applied the write.
                error_class = WriteOutcomeUnknown
                message = "A proxy timed out waiting for the write; it may have been applied."
        return error_class(
            message,
            operation=op.name,
            status=status,
            ruid=ruid,
            upstream_code=upstream_code,
            upstream_message=upstream_message,
            retry_after=parse_retry_after(headers.get("retry-after"), self.clock.now()),
            kind=kind,
        )

    def _expiry(self, holder: Mapping[str, Any], envelope: Mapping[str, Any]) -> datetime:
        now = self.clock.now()
        for source in (holder, envelope):
            seconds = source.get("auth_token_expire_seconds")
            if isinstance(seconds, int | float | str) and not isinstance(seconds, bool):
                try:
                    value = float(seconds)
                except ValueError:
                    value = math.nan
                # Relative seconds do not depend on the two clocks agreeing, so they win.
                if math.isfinite(value) and value > 0:
                    return now + timedelta(seconds=value)
        for source in (holder, envelope):
            stamp = source.get("auth_token_expire")
            if isinstance(stamp, str):
                try:
                    parsed = datetime.fromisoformat(stamp.strip())
                except ValueError:
                    continue
                return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
        return now + DEFAULT_TOKEN_TTL

    def _finished(
        self,
        op: Operation,
        path: str,
        started: float,
        *,
        status: int | None,
        ruid: str | None,
        error: KrossError | None,
    ) -> None:
        elapsed = time.perf_counter() - started
        log.debug(
            "kross_request",
            operation=op.name,
            path=path,
            status=status,
            ruid=ruid,
            elapsed_ms=round(elapsed * 1000, 1),
            error=error.code if error else None,
        )
        if self.observer is not None:
            self.observer(op.name, request_outcome(error), elapsed)


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        answer = json.loads(response.content)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _find_token(body: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any], str | None]:
    """The token, the object that holds it and its place: data, top level, or data.data."""
    data = body.get("data")
    candidates: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(data, Mapping):
        candidates.append(("data", data))
    candidates.append(("top", body))
    if isinstance(data, Mapping) and isinstance(data.get("data"), Mapping):
        candidates.append(("nested", data["data"]))
    for place, holder in candidates:
        value = holder.get("auth_token")
        if isinstance(value, str) and value:
            return value, holder, place
    return None, body, None


def _ruid(answer: Mapping[str, Any]) -> str | None:
    ruid = answer.get("ruid")
    return str(ruid) if ruid is not None else None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _error_code(value: Any) -> str | None:
    """The answer's error code as text; None when there is none (null, "", 0, "0", false)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if value == 0:
            return None
        # 1001 and 1001.0 are the same code.
        return str(int(value)) if float(value).is_integer() else str(value)
    if isinstance(value, str):
        text = value.strip()
        return None if text in ("", "0") else text
    # A structured code (list, object) is still a code: the answer is an error.
    return json.dumps(value, sort_keys=True, default=str)[:_MESSAGE_MAX]
