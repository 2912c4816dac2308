"""One request to the assistant platform: throttled, retried when safe, its answer read.

:class:`Transport` is what every resource of the client stands on: the
per-workspace throttle, the retry policy, the failure → error mapping, pagination
and the one-object helpers (:meth:`Transport._ask`, :meth:`Transport._listed`). The
rules it keeps are written in ``client.py``'s docstring.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypedDict, Unpack
from urllib.parse import quote

import anyio
import httpx
import structlog
from pydantic import BaseModel, SecretStr, ValidationError
from pyrate_limiter import Duration, Rate

from pmsgate.clock import Clock, Sleep, SystemClock
from pmsgate.integrations.assistant.errors import (
    CLASSIFICATION,
    ENDPOINT_REFUSED_STATUSES,
    AssistantConflict,
    AssistantEndpointUnavailable,
    AssistantError,
    AssistantForbidden,
    AssistantNotFound,
    AssistantRateLimited,
    AssistantUnauthorized,
    AssistantUnavailable,
    AssistantUnexpectedResponse,
    AssistantValidationError,
    AssistantWriteOutcomeUnknown,
)
from pmsgate.integrations.assistant.models import M, Outgoing, Page
from pmsgate.integrations.kit import (
    NOT_SENT,
    ErrorKind,
    RetryPolicy,
    Scrubber,
    deadline,
    parse_retry_after,
)
from pmsgate.ratelimit import RateWindows

log = structlog.get_logger("pmsgate.integrations.assistant.client")

# Below the platform's 120/min: the agent's tool calls spend the same per-workspace budget.
DEFAULT_REQUESTS_PER_MINUTE = 100
ACCOUNT_SCOPE = "account"
PAGE_SIZE_MAX = 100
_UPSTREAM_MESSAGE_MAX = 300
_KNOWN_OWNERS_MAX = 50_000
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-conduit-request-id")


# --- the throttle ------------------------------------------------------------------------------


class WorkspaceThrottle:
    """At most ``per_minute`` requests in any sliding minute per workspace, in this process.

    One :class:`~pmsgate.ratelimit.RateWindows` in memory, a key per scope; its waits are
    spent through the injected ``sleep``.
    """

    def __init__(self, per_minute: int, *, clock: Clock, sleep: Sleep) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.per_minute = per_minute
        self._rates = [Rate(per_minute, Duration.MINUTE)]
        self._sleep = sleep
        self._windows = RateWindows(clock=clock, retention_ms=Duration.MINUTE.value)

    def __repr__(self) -> str:
        return f"WorkspaceThrottle(per_minute={self.per_minute})"

    def hold(self, scope: str, seconds: float) -> None:
        """Let no request of ``scope`` start for ``seconds`` (the upstream's ``Retry-After``)."""
        self._windows.hold(scope, seconds)

    async def acquire(self, scope: str) -> float:
        """Take one permit for ``scope``, waiting until one frees; returns the seconds waited."""
        return await self._windows.acquire(scope, self._rates, self._sleep)


class ListOptions(TypedDict, total=False):
    """What a list request carries besides its page: query filters, the assumed route."""

    params: Mapping[str, str] | None
    assumed: str | None


class OnObject(TypedDict, total=False):
    """The options of a write on one object by id.

    ``workspace_id``: the workspace the object is in, counted for the throttle (else the
    one it was last seen in); ``idempotency_key``: makes the write replay-safe.
    """

    workspace_id: str | None
    idempotency_key: str | None


class Transport:
    """Speaks the assistant platform's ``/v1`` API over the given ``httpx.AsyncClient``."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        token: SecretStr,
        clock: Clock | None = None,
        sleep: Sleep = anyio.sleep,
        requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE,
        max_attempts: int = 4,
        max_retry_after_s: float = 60.0,
        timeout_s: float = 30.0,
        page_size: int = PAGE_SIZE_MAX,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not token.get_secret_value():
            raise ValueError("the platform token is empty")
        if not 1 <= page_size <= PAGE_SIZE_MAX:
            raise ValueError(f"page_size must be between 1 and {PAGE_SIZE_MAX}")
        self._http = http
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.clock = clock or SystemClock()
        self._sleep = sleep
        self.throttle = WorkspaceThrottle(requests_per_minute, clock=self.clock, sleep=sleep)
        # One policy for every request; its deadline bounds a request's retries, not a list.
        self.retry = retry or RetryPolicy(
            attempts=max(1, max_attempts),
            deadline_s=None,
            max_retry_after_s=max_retry_after_s,
        )
        self.timeout_s = timeout_s
        self._scrubber = Scrubber(limit=_UPSTREAM_MESSAGE_MAX)
        self.page_size = page_size
        self._owners: dict[str, str] = {}  # object id -> workspace id, learnt from answers

    # --- pagination ----------------------------------------------------------------------------

    async def _page(
        self,
        path: str,
        model: type[M],
        *,
        workspace_id: str | None,
        cursor: str | None = None,
        limit: int | None = None,
        **listing: Unpack[ListOptions],
    ) -> Page[M]:
        query = dict(listing.get("params") or {})
        query["limit"] = str(limit or self.page_size)
        if cursor:
            query["cursor"] = cursor
        assumed = listing.get("assumed")
        answer = await self._call("GET", path, workspace_id, params=query, assumed=assumed)
        if isinstance(answer, list):
            # Tolerance: a bare array is one complete page.
            answer = {"data": answer, "next_cursor": None, "has_more": False}
        try:
            page = Page[model].model_validate(answer)  # type: ignore[valid-type]
        except ValidationError as exc:
            raise shape_error(model, exc, "GET", path) from None
        for item in page.data:
            self._learn(item)
        return page

    async def _listed(
        self,
        model: type[M],
        template: str,
        *values: str,
        scope: str | None,
        params: Mapping[str, str] | None = None,
        assumed: bool = False,
    ) -> list[M]:
        """Every item of the list at ``template`` (its ``{…}`` filled with ``values``), all pages.

        ``assumed``: the endpoint is one this project assumes (see :meth:`_call`).
        """
        path = _fill(template, values)
        endpoint = f"GET {template}" if assumed else None
        pages = self._iterate(path, model, workspace_id=scope, params=params, assumed=endpoint)
        return [item async for item in pages]

    async def _in_workspace(
        self, model: type[M], path: str, workspace_id: str, *, assumed: bool = False
    ) -> list[M]:
        """Every item of a list filtered by ``?workspace_id=``, all pages."""
        params = {"workspace_id": workspace_id}
        return await self._listed(model, path, scope=workspace_id, params=params, assumed=assumed)

    async def _iterate(
        self, path: str, model: type[M], *, workspace_id: str | None, **listing: Unpack[ListOptions]
    ) -> AsyncIterator[M]:
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = await self._page(
                path, model, workspace_id=workspace_id, cursor=cursor, **listing
            )
            for item in page.data:
                yield item
            if not page.has_more:
                return
            if not page.next_cursor or page.next_cursor in seen:
                # A server that keeps saying "more" without moving on would loop forever.
                raise AssistantUnexpectedResponse(
                    "The list says has_more but gives no new next_cursor.", method="GET", path=path
                )
            seen.add(page.next_cursor)
            cursor = page.next_cursor

    # --- one request, throttled and (when safe) retried ----------------------------------------

    def _scope_of(self, object_id: str, workspace_id: str | None) -> str | None:
        return workspace_id or self._owners.get(object_id)

    def _learn(self, item: BaseModel) -> None:
        object_id, workspace_id = getattr(item, "id", None), getattr(item, "workspace_id", None)
        if isinstance(object_id, str) and isinstance(workspace_id, str):
            if len(self._owners) >= _KNOWN_OWNERS_MAX:
                self._owners.pop(next(iter(self._owners)))
            self._owners[object_id] = workspace_id

    async def _ask(
        self,
        model: type[M],
        route: str,
        *values: str,
        scope: str | None,
        assumed: bool = False,
        key: str | None = None,
        **options: Any,
    ) -> M:
        """One request whose answer is one object (``{"data": {...}}``), read as ``model``.

        ``route`` is ``METHOD /v1/template``; the template's ``{…}`` are filled with
        ``values``, each quoted as one path segment. ``assumed``: the endpoint is one
        this project assumes (see :meth:`_call`). ``key`` is the idempotency key;
        ``options`` are :meth:`_call`'s (body, params, secrets).
        """
        method, template = route.split(" ", 1)
        path = _fill(template, values)
        answer = await self._call(
            method, path, scope, idempotency_key=key, assumed=route if assumed else None, **options
        )
        return self._one(model, answer)

    async def _ask_workspace(
        self, model: type[M], route: str, workspace_id: str, *values: str, **options: Any
    ) -> M:
        """:meth:`_ask` of an assumed endpoint under ``/v1/workspaces/{id}``."""
        return await self._ask(
            model, route, workspace_id, *values, scope=workspace_id, assumed=True, **options
        )

    async def _create(self, model: type[M], path: str, new: Outgoing, key: str | None) -> M:
        """``POST path`` of a body that names its workspace (tools, skills, agents)."""
        scope = getattr(new, "workspace_id", None)
        return await self._ask(model, f"POST {path}", scope=scope, body=dump(new), key=key)

    # One object by id (custom tools, agents, knowledge nodes): read, change, delete.

    async def _get_object(
        self, model: type[M], path: str, object_id: str, workspace_id: str | None
    ) -> M:
        scope = self._scope_of(object_id, workspace_id)
        return await self._ask(model, f"GET {path}/{{id}}", object_id, scope=scope)

    async def _update_object(
        self, model: type[M], path: str, object_id: str, changes: BaseModel, **on: Unpack[OnObject]
    ) -> M:
        scope, body = self._scope_of(object_id, on.get("workspace_id")), _dump_changes(changes)
        route, key = f"PATCH {path}/{{id}}", on.get("idempotency_key")
        return await self._ask(model, route, object_id, scope=scope, body=body, key=key)

    async def _delete_object(self, path: str, object_id: str, **on: Unpack[OnObject]) -> None:
        scope = self._scope_of(object_id, on.get("workspace_id"))
        path = _fill(f"{path}/{{id}}", (object_id,))
        await self._call("DELETE", path, scope, idempotency_key=on.get("idempotency_key"))
        self._owners.pop(object_id, None)

    def _one(self, model: type[M], answer: Any) -> M:
        try:
            item = model.model_validate(_unwrap(answer))
        except ValidationError as exc:
            raise shape_error(model, exc, None, None) from None
        self._learn(item)
        return item

    async def _call(
        self,
        method: str,
        path: str,
        workspace_id: str | None,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        secrets: tuple[str, ...] = (),
        assumed: str | None = None,
    ) -> Any:
        """Send one request; retry (stamina) only reads and writes that carry an idempotency key.

        ``assumed`` names the route template of an endpoint the public reference does not
        document: its refusal (403/404/405/501) becomes ``AssistantEndpointUnavailable``.
        """
        token = self._token.get_secret_value()
        scrub = self._scrubber.with_secrets(token, *secrets)
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        replay_safe = method == "GET" or bool(idempotency_key)
        scope = workspace_id or ACCOUNT_SCOPE

        def on_wait(error: Exception, wait: float) -> float:
            # The throttle holds the workspace back for the upstream's wait (through the
            # injected sleep); stamina waits nothing more, so the wait is done once.
            self.throttle.hold(scope, wait)
            return 0.0

        attempt = 0
        async for trying in self.retry.retrying(replay_safe=replay_safe, on_wait=on_wait):
            with trying:
                attempt += 1
                await self.throttle.acquire(scope)
                started = time.perf_counter()
                try:
                    response = await self._send(method, path, params, body, headers, replay_safe)
                    answer = self._interpret(method, path, response, scrub, replay_safe, assumed)
                except AssistantError as error:
                    self._log(method, path, started, attempt, error=error)
                    raise
                self._log(method, path, started, attempt, status=response.status_code)
                return answer
        raise AssertionError("stamina ended without an attempt")  # pragma: no cover

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Mapping[str, Any] | None,
        headers: dict[str, str],
        replay_safe: bool,
    ) -> httpx.Response:
        try:
            with deadline(self.timeout_s):
                return await self._http.request(
                    method,
                    self.base_url + path,
                    params=dict(params) if params else None,
                    json=dict(body) if body is not None else None,
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout_s),
                )
        except NOT_SENT as exc:
            raise AssistantUnavailable(
                f"Could not reach the assistant platform ({type(exc).__name__}).",
                method=method,
                path=path,
                may_have_been_sent=False,
            ) from None
        except (httpx.TransportError, TimeoutError) as exc:
            reason = type(exc).__name__
            if replay_safe:
                raise AssistantUnavailable(
                    f"The assistant platform did not answer ({reason}).", method=method, path=path
                ) from None
            raise AssistantWriteOutcomeUnknown(
                f"The write was sent but no answer came ({reason}); it may have been applied.",
                method=method,
                path=path,
            ) from None

    def _interpret(
        self,
        method: str,
        path: str,
        response: httpx.Response,
        scrub: Scrubber,
        replay_safe: bool,
        assumed: str | None,
    ) -> Any:
        status = response.status_code
        try:
            answer = json.loads(response.content) if response.content else None
        except ValueError:
            answer = None
        request_id = next(
            (response.headers[h] for h in _REQUEST_ID_HEADERS if h in response.headers), None
        )
        if 200 <= status < 300:
            if answer is None and status != 204 and method != "DELETE":
                raise AssistantUnexpectedResponse(
                    f"HTTP {status} without a JSON body.",
                    method=method,
                    path=path,
                    status=status,
                    request_id=request_id,
                )
            return answer
        upstream = scrub(answer.get("error") if isinstance(answer, dict) else None)
        context: dict[str, Any] = {
            "method": method,
            "path": path,
            "status": status,
            "upstream_message": upstream,
            "request_id": request_id,
        }
        if assumed is not None and status in ENDPOINT_REFUSED_STATUSES:
            raise AssistantEndpointUnavailable(
                f"The platform refused {assumed} (HTTP {status}): an endpoint this project "
                "assumes and the public reference does not document.",
                endpoint=assumed,
                **context,
            )
        if status == 504 and not replay_safe:
            # A proxy gave up waiting: the origin may still have applied the write.
            raise AssistantWriteOutcomeUnknown(
                "A proxy timed out waiting for the write; it may have been applied.", **context
            )
        raise self._error(CLASSIFICATION.classify(status), upstream, response.headers, context)

    def _error(
        self,
        kind: ErrorKind,
        upstream: str | None,
        headers: httpx.Headers,
        context: dict[str, Any],
    ) -> AssistantError:
        cls = AssistantError.for_kind(kind)
        status = context["status"]
        if cls is AssistantRateLimited:
            wait = parse_retry_after(headers.get("retry-after"), self.clock.now())
            return AssistantRateLimited(
                "The workspace's request budget is spent.", retry_after=wait, **context
            )
        messages: dict[type[AssistantError], str] = {
            AssistantUnauthorized: "The platform refused the token.",
            AssistantForbidden: "The token may not do this.",
            AssistantNotFound: upstream or "Not found.",
            AssistantConflict: upstream or "Already exists.",
            AssistantValidationError: upstream or "The request was refused.",
            AssistantUnavailable: f"The platform failed (HTTP {status}).",
        }
        return cls(messages.get(cls, f"Unexpected HTTP status {status}."), **context)

    def _log(
        self,
        method: str,
        path: str,
        started: float,
        attempt: int,
        *,
        status: int | None = None,
        error: AssistantError | None = None,
    ) -> None:
        # Method, path and status only: bodies carry secret values and guest-facing text.
        log.debug(
            "assistant_request",
            method=method,
            path=path,
            status=error.status if error is not None else status,
            attempt=attempt,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
            error=error.code if error is not None else None,
            request_id=error.request_id if error is not None else None,
        )


# --- helpers -----------------------------------------------------------------------------------


def _seg(value: str) -> str:
    """One path segment, quoted so an id can never change the path."""
    if not value:
        raise ValueError("an id in the path is empty")
    return quote(value, safe="")


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _dump_changes(model: BaseModel) -> dict[str, Any]:
    # Only what the caller set: an explicit None (e.g. parent_id=None) is sent as null.
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def shape_error(
    model: type[BaseModel], exc: ValidationError, method: str | None, path: str | None
) -> AssistantUnexpectedResponse:
    # Field locations only: values may be secrets or guest-facing text.
    where = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})[:5]
    return AssistantUnexpectedResponse(
        f"The answer does not match {model.__name__} at {where}.", method=method, path=path
    )


def _unwrap(answer: Any) -> Any:
    """The object of a single-object answer: documented ``{"data": {...}}``, or a bare object."""
    if (
        isinstance(answer, dict)
        and isinstance(answer.get("data"), dict)
        and "id" not in answer
        and "success" not in answer
    ):
        return answer["data"]
    return answer


_PLACEHOLDER = re.compile(r"\{[^}]*\}")


def _fill(template: str, values: tuple[str, ...]) -> str:
    """``template`` with each ``{…}`` replaced, in order, by one quoted path segment."""
    segments = iter(values)
    return _PLACEHOLDER.sub(lambda _: _seg(next(segments)), template)
