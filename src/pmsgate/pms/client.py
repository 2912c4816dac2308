"""The booking-system client: one call, one HTTP request, one typed outcome.

Wire contract: ``docs/kross-api.md``. The client resolves every operation
through the :class:`~pmsgate.pms.operations.OperationTable` first, so an
operation that does not exist or is out of scope is refused before any I/O.
It never retries (the gateway owns retries, limits and token rotation) and
never writes a token, password or api key into a log line or an exception.
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio
import httpx
import structlog
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from pmsgate.clock import Clock, SystemClock
from pmsgate.config import Settings
from pmsgate.pms.credentials import Credentials
from pmsgate.pms.errors import (
    AccessDenied,
    AuthenticationFailed,
    EdgeBlocked,
    HtmlInsteadOfJson,
    InvalidRequest,
    PmsError,
    RateLimited,
    TokenRejected,
    TooManySessions,
    UnexpectedResponse,
    UnknownOperation,
    UpstreamUnavailable,
    WriteOutcomeUnknown,
)
from pmsgate.pms.models import WirePayload
from pmsgate.pms.operations import Operation, OperationTable, load_operations

log = structlog.get_logger(__name__)

TOKEN_OPERATION = "auth/get-token"
DEFAULT_TOKEN_TTL = timedelta(days=7)
BROWSER_UA_PREFIX = "Mozilla/5.0"
_EDGE_BLOCK_MARKER = "error code: 1010"
_UPSTREAM_MESSAGE_MAX = 200

# Failures that happen before a byte of the request reaches the server: always safe to repeat.
_NOT_SENT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.LocalProtocolError,
    httpx.ProxyError,
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

    def expires_in(self, now: datetime) -> timedelta:
        """Time left until expiry (negative once expired)."""
        return self.expires_at - now


@dataclass(frozen=True)
class PmsResult:
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


class PmsClient:
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
    ) -> None:
        self._http = http
        self.base_url = base_url.rstrip("/")
        self.operations = operations
        self.user_agent = user_agent
        self.clock = clock
        self.timeout_s = timeout_s
        if not user_agent.startswith(BROWSER_UA_PREFIX):
            # Sent anyway so the fault is visible as pms_edge_blocked, but say why up front.
            log.warning("pms_user_agent_not_browser_style", expected_prefix=BROWSER_UA_PREFIX)

    @classmethod
    def from_settings(
        cls, settings: Settings, http: httpx.AsyncClient, clock: Clock | None = None
    ) -> PmsClient:
        """A client configured from PMSGATE_* settings (base URL, path overrides, UA, timeout)."""
        return cls(
            http,
            base_url=settings.kross_base_url,
            operations=load_operations(settings.kross_paths),
            user_agent=settings.user_agent,
            clock=clock or SystemClock(),
            timeout_s=settings.kross_timeout_s,
        )

    async def get_token(self, credentials: Credentials) -> Token:
        """Obtain a new bearer token (``auth/get-token``); every call opens a session upstream."""
        operation = self.operations.resolve(TOKEN_OPERATION)
        secrets = (
            credentials.password.get_secret_value(),
            credentials.api_key.get_secret_value(),
        )
        body = await self._exchange(
            operation, credentials.token_request_body(), bearer=None, secrets=secrets
        )
        value, holder = _find_token(body)
        if value is None:
            raise UnexpectedResponse(
                "The token answer carries no auth_token (looked in data, top level, data.data).",
                operation=operation.name,
                ruid=_ruid(body),
            )
        return Token(value=SecretStr(value), expires_at=self._expiry(holder, body))

    async def call(
        self,
        operation: str,
        payload: Mapping[str, Any] | WirePayload,
        token: Token | str,
    ) -> PmsResult:
        """Send one operation with a bearer token and return its data envelope."""
        op = self.operations.resolve(operation)
        if op.name == TOKEN_OPERATION:
            raise ValueError("auth/get-token is sent by get_token(), never by call().")
        body = payload.to_wire() if isinstance(payload, WirePayload) else dict(payload)
        bearer = self._bearer(op, token)
        answer = await self._exchange(op, body, bearer=bearer, secrets=(bearer,))
        if "data" not in answer:
            raise UnexpectedResponse(
                "The answer has no data field.", operation=op.name, ruid=_ruid(answer)
            )
        return PmsResult(
            operation=op.name,
            data=answer.get("data"),
            ruid=_ruid(answer),
            count=_int_or_none(answer.get("count")),
            total_count=_int_or_none(answer.get("total_count")),
            limit=_int_or_none(answer.get("limit")),
            offset=_int_or_none(answer.get("offset")),
        )

    def url_for(self, operation: Operation) -> str:
        """The absolute URL an operation is POSTed to."""
        return f"{self.base_url}/v5/{operation.path}"

    def _bearer(self, op: Operation, token: Token | str) -> str:
        if isinstance(token, Token):
            if token.is_expired(self.clock.now()):
                # Known dead: do not spend a request on it, the caller refreshes first.
                raise TokenRejected("The token has expired.", operation=op.name)
            return token.value.get_secret_value()
        if not token:
            raise TokenRejected("No token was given.", operation=op.name)
        return token

    async def _exchange(
        self,
        op: Operation,
        body: dict[str, Any],
        *,
        bearer: str | None,
        secrets: tuple[str, ...],
    ) -> dict[str, Any]:
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        started = time.perf_counter()
        try:
            response = await self._post(op, body, headers)
        except PmsError as exc:
            self._log(op, started, status=None, ruid=None, error=exc)
            raise
        try:
            answer = self._interpret(op, response, secrets)
        except PmsError as exc:
            self._log(op, started, status=response.status_code, ruid=exc.ruid, error=exc)
            raise
        self._log(op, started, status=response.status_code, ruid=_ruid(answer), error=None)
        return answer

    async def _post(
        self, op: Operation, body: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        url = self.url_for(op)
        # httpx's own timeouts are per phase and do not apply to in-process transports;
        # the outer deadline bounds the whole request either way.
        deadline = self.timeout_s + min(1.0, self.timeout_s * 0.1)
        try:
            with anyio.fail_after(deadline):
                return await self._http.post(
                    url, json=body, headers=headers, timeout=httpx.Timeout(self.timeout_s)
                )
        except _NOT_SENT as exc:
            raise UpstreamUnavailable(
                f"Could not reach the booking system ({type(exc).__name__}).", operation=op.name
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
        self, op: Operation, response: httpx.Response, secrets: tuple[str, ...]
    ) -> dict[str, Any]:
        status = response.status_code
        text = response.text
        if status == 403 and _EDGE_BLOCK_MARKER in text.lower():
            raise EdgeBlocked(
                "The edge protection blocked the request (error 1010).",
                operation=op.name,
                status=status,
            )
        answer = _json_object(response)
        if answer is None:
            raise self._non_json_error(op, response)

        upstream_code = answer.get("error_code")
        if status >= 400 or upstream_code:
            raise self._error(
                op,
                status,
                str(upstream_code) if upstream_code else None,
                _scrub(answer.get("error_message"), secrets),
                _ruid(answer),
                response.headers,
            )
        if not 200 <= status < 300:
            raise UnexpectedResponse(
                f"Unexpected HTTP status {status}.", operation=op.name, status=status
            )
        return answer

    def _non_json_error(self, op: Operation, response: httpx.Response) -> PmsError:
        status = response.status_code
        content_type = response.headers.get("content-type", "").lower()
        looks_html = "html" in content_type or response.text.lstrip()[:15].lower().startswith(
            ("<!doctype", "<html")
        )
        if status >= 500 or status == 408:
            return self._unavailable(op, status, None, None, None)
        if status == 429:
            return RateLimited(
                "The booking system is rate limiting this facility.",
                operation=op.name,
                status=status,
                retry_after=self._retry_after(response.headers),
            )
        if looks_html:
            return HtmlInsteadOfJson(
                f"The booking system answered HTML (HTTP {status}) instead of JSON.",
                operation=op.name,
                status=status,
            )
        if status == 404:
            return UnknownOperation(
                "The booking system has no such path.", operation=op.name, status=status
            )
        return UnexpectedResponse(
            f"The booking system answered a non-JSON body (HTTP {status}).",
            operation=op.name,
            status=status,
        )

    def _error(
        self,
        op: Operation,
        status: int,
        upstream_code: str | None,
        upstream_message: str | None,
        ruid: str | None,
        headers: httpx.Headers,
    ) -> PmsError:
        context: dict[str, Any] = {
            "operation": op.name,
            "status": status,
            "ruid": ruid,
            "upstream_code": upstream_code,
            "upstream_message": upstream_message,
        }
        is_token_request = op.name == TOKEN_OPERATION
        if upstream_code == "AUTH_FAILED" or (status == 401 and is_token_request):
            return AuthenticationFailed("The booking system refused the credentials.", **context)
        if upstream_code == "INVALID_TOKEN" or status == 401:
            return TokenRejected("The booking system rejected the bearer token.", **context)
        if upstream_code == "TOO_MANY_SESSIONS":
            return TooManySessions(
                "The facility has too many active tokens for a new one.", **context
            )
        if upstream_code == "RATE_LIMITED" or status == 429:
            return RateLimited(
                "The booking system is rate limiting this facility.",
                retry_after=self._retry_after(headers),
                **context,
            )
        if upstream_code == "OPERATION_NOT_FOUND":
            return UnknownOperation(
                f"The booking system has no operation at path {op.path!r}.", **context
            )
        if upstream_code == "SERVER_ERROR" or status >= 500 or status == 408:
            return self._unavailable(op, status, upstream_code, upstream_message, ruid)
        if status == 403:
            return AccessDenied("The booking system refused access.", **context)
        if 400 <= status < 500 or upstream_code:
            return InvalidRequest("The booking system refused the request.", **context)
        return UnexpectedResponse(f"Unexpected HTTP status {status}.", **context)

    def _unavailable(
        self,
        op: Operation,
        status: int,
        upstream_code: str | None,
        upstream_message: str | None,
        ruid: str | None,
    ) -> PmsError:
        context: dict[str, Any] = {
            "operation": op.name,
            "status": status,
            "ruid": ruid,
            "upstream_code": upstream_code,
            "upstream_message": upstream_message,
        }
        if status == 504 and not op.replay_safe:
            # A gateway timeout means the origin may still have applied the write.
            return WriteOutcomeUnknown(
                "A proxy timed out waiting for the write; it may have been applied.", **context
            )
        return UpstreamUnavailable(f"The booking system failed (HTTP {status}).", **context)

    def _retry_after(self, headers: httpx.Headers) -> float | None:
        raw = headers.get("retry-after")
        if raw is None:
            return None
        raw = raw.strip()
        try:
            seconds = float(raw)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - self.clock.now()).total_seconds()
        if not math.isfinite(seconds):
            return None
        return max(0.0, seconds)

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

    def _log(
        self,
        op: Operation,
        started: float,
        *,
        status: int | None,
        ruid: str | None,
        error: PmsError | None,
    ) -> None:
        log.debug(
            "pms_request",
            operation=op.name,
            path=op.path,
            status=status,
            ruid=ruid,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
            error=error.code if error else None,
        )


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        answer = json.loads(response.content)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _find_token(body: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    """The token and the object that holds it: data, top level, or data.data (in that order)."""
    data = body.get("data")
    candidates: list[Mapping[str, Any]] = []
    if isinstance(data, Mapping):
        candidates.append(data)
    candidates.append(body)
    if isinstance(data, Mapping) and isinstance(data.get("data"), Mapping):
        candidates.append(data["data"])
    for holder in candidates:
        value = holder.get("auth_token")
        if isinstance(value, str) and value:
            return value, holder
    return None, body


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


def _scrub(message: Any, secrets: tuple[str, ...]) -> str | None:
    """The upstream's error text, without our secrets and cut short."""
    if not isinstance(message, str) or not message:
        return None
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    return message[:_UPSTREAM_MESSAGE_MAX]
