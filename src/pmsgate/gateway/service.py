"""The gateway's core: every upstream call a tool or operation makes goes through here.

Per call: the facility's state is checked (an integration in ``error`` is not
called again, except one re-authentication attempt per interval) → a token comes
from the token manager → a permit is taken from the facility's limiter (before
every request, retries and alternate paths included) → one request is sent
through ``integrations/kross/``. Reads are retried by the upstream kit's
:class:`~pmsgate.integrations.kit.RetryPolicy` (stamina: jittered exponential backoff,
``Retry-After`` honoured unless it outlasts the deadline); writes are never
retried after they may have been sent.

Retries are not stacked on retries. The worst case of one tool call (one
:meth:`Gateway.read`), every request taking a permit:

- at most ``read_attempts`` attempts (4 by default), each at most one
  ``auth/get-token`` (only when no valid token is held; a refused login ends the
  call and puts the facility in ``error``) and one request of the operation;
- once per tool call, not per attempt: a token rejected (401, or an error code
  meaning "invalid/expired token") gets one new token and one retry; rejected
  again, the call fails;
- until the process has found an operation's path: one request per alternate
  path after a "no such operation" answer (the next attempt starts on the path
  tried last, so this is not multiplied by the attempts).

So at most ``read_attempts * 2 + 2 + alternates`` upstream requests: 11 with the
defaults and one alternate path. A write (:meth:`Gateway.write_once`) is one
attempt: at most 1 + 2 + alternates = 5 (a get-token, the write, the one token
refresh and retry, one alternate path on "no such operation").
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import InitVar, dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import anyio
import structlog

from pmsgate.audit.actions import Actor
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.errors import NotFound
from pmsgate.gateway.cache import Cached, ReadCache
from pmsgate.gateway.call_log import CallLog
from pmsgate.gateway.facilities import CLI_ACTOR, FacilityView, Limits, NewFacility
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.facility_status import (
    CAUSE_ACCEPTED_AGAIN,
    CAUSE_REFUSED,
    CAUSE_VERIFIED_ON_FIRST_USE,
)
from pmsgate.gateway.limiter import BudgetExhausted, FacilityLimiter, Priority, limiter_key
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.gateway.tokens import TokenManager
from pmsgate.gateway.tracing import Tracing, mark_failed, upstream_span
from pmsgate.gateway.upstream_errors import auth_failed, translate
from pmsgate.gateway.usage import UsageCounter
from pmsgate.gateway.verification import kross_verifier
from pmsgate.integrations.kit import RetryPolicy
from pmsgate.integrations.kross import errors as kross
from pmsgate.integrations.kross.client import KrossClient, KrossResult, Token
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.operations import Operation

log = structlog.get_logger(__name__)
T = TypeVar("T")

# Failures after which the last good answer is better than no answer.
STALE_ON: tuple[type[BaseException], ...] = (
    BudgetExhausted,
    kross.UpstreamUnavailable,
    kross.RateLimited,
    kross.TooManySessions,
)


@dataclass(frozen=True)
class GatewayPolicy:
    """Timing rules of upstream calls (all from settings)."""

    limiter_wait_s: float = 2.0
    read_attempts: int = 4
    read_deadline_s: float = 20.0
    retry_wait_initial_s: float = 0.5
    retry_wait_max_s: float = 8.0
    reauth_interval_s: float = 900.0
    limit_by_account: bool = False
    refresh_ahead_ratio: float = 0.75

    @classmethod
    def from_settings(cls, settings: Settings) -> GatewayPolicy:
        """The policy the settings give (PMSGATE_LIMITER_*, PMSGATE_REAUTH_INTERVAL_S, …)."""
        return cls(
            limiter_wait_s=settings.limiter_wait_s,
            reauth_interval_s=settings.reauth_interval_s,
            limit_by_account=settings.limiter_scope == "account",
            refresh_ahead_ratio=settings.cache_refresh_ahead_ratio,
        )

    @property
    def read_retry(self) -> RetryPolicy:
        """The retry policy of reads: a Retry-After longer than the deadline is not waited."""
        return RetryPolicy(
            attempts=self.read_attempts,
            deadline_s=self.read_deadline_s,
            wait_initial_s=self.retry_wait_initial_s,
            wait_max_s=self.retry_wait_max_s,
            max_retry_after_s=self.read_deadline_s,
        )


class _TokenRetry:
    """The one token refresh-and-retry a tool call may make, shared by all its attempts."""

    __slots__ = ("used",)

    def __init__(self) -> None:
        self.used = False


def body_hash(payload: Mapping[str, Any]) -> str:
    """A stable hash of a JSON body (key order does not matter)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(repr=False, eq=False, kw_only=True)
class Gateway:
    """Calls the booking system for a facility, within its limits and state."""

    facilities: FacilityService
    kross_client: InitVar[KrossClient]
    tokens: TokenManager
    limiter: FacilityLimiter
    cache: ReadCache
    clock: Clock
    metrics: GatewayMetrics
    usage: UsageCounter
    # The tool-call log and each facility's latest upstream success and failure.
    call_log: CallLog
    policy: GatewayPolicy = field(default_factory=GatewayPolicy)
    tracing: Tracing | None = None

    def __post_init__(self, kross_client: KrossClient) -> None:
        self.kross = kross_client
        self._reauth_locks: dict[str, anyio.Lock] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}

    def operation(self, name: str) -> Operation:
        """The operation of this name, or the caller-facing error refusing it (never sent)."""
        try:
            return self.kross.operations.resolve(name)
        except kross.KrossError as error:
            raise translate(error) from None

    # --- background refreshes ----------------------------------------------------------------

    def _refresh_in_background(
        self, key: str, max_age_s: float, fetch: Callable[[Priority], Awaitable[Any]]
    ) -> None:
        if key in self._refreshing or self.policy.refresh_ahead_ratio >= 1:
            return

        async def refresh() -> None:
            try:
                # Anything a hair younger than the threshold counts as fresh: no double refresh.
                await self.cache.get(
                    key,
                    max_age_s=max(0.0, max_age_s - 0.001),
                    fetch=lambda: fetch(Priority.BACKGROUND),
                    stale_on=STALE_ON,
                )
            except Exception as error:  # a background refresh must never fail a caller
                log.info("background_refresh_failed", key=key, error=type(error).__name__)
            finally:
                self._refreshing.pop(key, None)

        self._refreshing[key] = asyncio.create_task(refresh())

    async def settle(self) -> None:
        """Wait for the background refreshes under way (tests, orderly shutdown)."""
        while self._refreshing:
            await asyncio.gather(*self._refreshing.values(), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel background refreshes still running; write the key uses still in memory."""
        for task in list(self._refreshing.values()):
            task.cancel()
        await asyncio.gather(*self._refreshing.values(), return_exceptions=True)
        self._refreshing.clear()
        # The gateway closes before the database engine: the last batch of uses still lands,
        # and so do the last logged calls.
        await self.facilities.aclose()
        await self.call_log.aclose()

    # --- reads ------------------------------------------------------------------------------

    def parsed(self, facility: FacilityView, key: str, value: Any, parse: Callable[[Any], T]) -> T:
        """``parse(value)`` of what :meth:`cached_read` returned for ``key``, kept with the
        cache's entry (:meth:`ReadCache.parsed`: bounded, dropped when the entry is)."""
        return self.cache.parsed(f"{facility.hotel_id}:{key}", value, parse)

    async def cached_read(
        self,
        facility: FacilityView,
        key: str,
        *,
        max_age_s: float,
        fetch: Callable[[Priority], Awaitable[Any]],
    ) -> Cached:
        """A cached value, fetched once for all concurrent callers, stale rather than failing.

        An answer served from the cache past ``refresh_ahead_ratio`` of its freshness bound
        is refreshed in the background, at background priority, so the next caller still
        finds a fresh answer without waiting and the refresh never takes the permits
        interactive calls need.
        """
        full_key = f"{facility.hotel_id}:{key}"
        try:
            cached = await self.cache.get(
                full_key,
                max_age_s=max_age_s,
                fetch=lambda: fetch(Priority.INTERACTIVE),
                stale_on=STALE_ON,
            )
        except kross.KrossError as error:
            raise translate(error) from None
        if cached.source == "cache" and not cached.stale and facility.status == "error":
            # The booking system refused this facility's credentials since the answer was
            # cached (a password change): nothing newer can be had, so it is no longer fresh.
            cached = dataclasses.replace(cached, stale=True)
        refresh_at = self.policy.refresh_ahead_ratio * max_age_s
        if cached.source == "cache" and not cached.stale and cached.age_s >= refresh_at:
            self._refresh_in_background(full_key, refresh_at, fetch)
        if cached.source == "cache":
            self.metrics.cache_hits.labels(stale=str(cached.stale).lower()).inc()
        if cached.stale:
            log.info("stale_answer", hotel_id=facility.hotel_id, key=key, age_s=cached.age_s)
        return cached

    async def read(
        self,
        facility: FacilityView,
        operation: str,
        payload: Mapping[str, Any],
        *,
        priority: Priority,
    ) -> KrossResult:
        """One read operation, retried on transient failures inside the permit budget.

        ``priority``: INTERACTIVE when a caller waits for the answer, BACKGROUND otherwise
        (a refresh ahead of need, a job): background work spends only its share of the
        budget and yields to waiting interactive calls (:mod:`pmsgate.gateway.limiter`).
        """
        op = self.operation(operation)
        if op.kind != "read":
            raise ValueError(f"{operation} is not a read")

        token_retry = _TokenRetry()
        async for attempt in self.policy.read_retry.retrying(replay_safe=op.replay_safe):
            with attempt:
                return await self._send(facility, op, payload, priority, token_retry)
        raise AssertionError("unreachable: stamina re-raises the last failure")

    # --- the single path every upstream request takes -------------------------------------

    async def _send(
        self,
        facility: FacilityView,
        op: Operation,
        payload: Mapping[str, Any],
        priority: Priority,
        token_retry: _TokenRetry,
    ) -> KrossResult:
        """One upstream attempt (plus, once per tool call, one token refresh and retry)."""
        # The caller's view may come from the key cache: the state that decides whether the
        # booking system is called at all (status, limits) is read fresh.
        facility = await self.facilities.get(facility.hotel_id)
        await self._guard_integration(facility)

        async def before_attempt() -> None:
            # Every request takes a permit: a retry, an alternate path, the retry after a
            # new token.
            # A write is sent only under the shared limit (never on an outage budget).
            await self._permit(facility, priority, shared_only=op.kind == "write")
            self.usage.upstream_call(facility.hotel_id)

        token = await self._token(facility, priority)
        try:
            return await self._observe(facility, op, token, payload, before_attempt)
        except kross.TokenRejected:
            # A rejected token was refused unprocessed: a new token and one more try is safe,
            # even for writes. The old token is dropped either way.
            await self.tokens.invalidate(facility.hotel_id, token)
            if token_retry.used:
                raise
            token_retry.used = True
            log.info("kross_token_rejected", hotel_id=facility.hotel_id, operation=op.name)
        token = await self._token(facility, priority)
        return await self._observe(facility, op, token, payload, before_attempt)

    async def _observe(
        self,
        facility: FacilityView,
        op: Operation,
        token: Any,
        payload: Mapping[str, Any],
        before_attempt: Callable[[], Awaitable[None]],
    ) -> KrossResult:
        with upstream_span(self.tracing, op.name, facility.hotel_id) as span:
            try:
                result = await self.kross.call(
                    op.name, payload, token, before_attempt=before_attempt
                )
            except kross.KrossError as error:
                self.metrics.upstream_calls.labels(facility.hotel_id, op.name, error.code).inc()
                self.call_log.upstream_failed(facility.id, error.code)
                if isinstance(error, kross.RateLimited):
                    self.metrics.upstream_429s.labels(facility.hotel_id).inc()
                mark_failed(span, error.code)
                raise
        self.metrics.upstream_calls.labels(facility.hotel_id, op.name, "ok").inc()
        self.call_log.upstream_succeeded(facility.id)
        return result

    def limit_key(self, facility: FacilityView) -> str:
        """Whose budget a call spends: the facility's, or its API account's when so configured."""
        return limiter_key(
            facility.hotel_id, facility.username, by_account=self.policy.limit_by_account
        )

    async def token_permit(self, hotel_id: str) -> None:
        """Take a permit for an ``auth/get-token`` request: it counts against the limits too."""
        facility = await self.facilities.get(hotel_id)
        await self._permit(facility, Priority.INTERACTIVE)
        self.metrics.token_refreshes.labels(hotel_id).inc()
        self.usage.upstream_call(hotel_id)

    async def _permit(
        self, facility: FacilityView, priority: Priority, *, shared_only: bool = False
    ) -> None:
        await self._acquire(self.limit_key(facility), facility.limits, priority, shared_only)

    async def _acquire(
        self, key: str, limits: Limits, priority: Priority, shared_only: bool = False
    ) -> None:
        await self.limiter.acquire(
            key,
            limits,
            priority,
            wait_s=self.policy.limiter_wait_s,
            shared_only=shared_only,
        )

    # --- registration -------------------------------------------------------------------------

    async def add_facility(
        self, new: NewFacility, *, verify: bool = True, actor: Actor = CLI_ACTOR
    ) -> tuple[FacilityView, str]:
        """Register a facility whose credentials a token request proved (docs/requirements.md R2.5).

        The request takes a permit of the new facility's budget (its hotel_id, or its API
        account's, with the limits it is being registered with) like every booking-system
        request; a refusal, a failure or a spent budget stores nothing. The token it got
        becomes the facility's token (a token is an upstream session: no second one is
        opened). ``verify=False`` stores the facility ``unverified`` without any request.
        The CLI's ``facilities add`` and the admin API's ``POST /admin/facilities`` run this.
        """
        if not verify:
            return await self.facilities.add(new, unverified=True, actor=actor)
        issued: list[Token] = []
        verified_at = self.clock.now()
        key = limiter_key(
            new.hotel_id.strip(), new.username.strip(), by_account=self.policy.limit_by_account
        )

        async def permit(hotel_id: str) -> None:
            await self._acquire(key, new.limits, Priority.INTERACTIVE)
            self.metrics.token_refreshes.labels(hotel_id).inc()
            self.usage.upstream_call(hotel_id)

        view, raw_key = await self.facilities.add(
            new, verify=kross_verifier(self.kross, permit, keep=issued.append), actor=actor
        )
        if issued:
            await self.tokens.adopt(view.hotel_id, issued[-1], verified_at)
        log.info("facility_verified", hotel_id=view.hotel_id)
        return view, raw_key

    # --- tokens for a caller outside the tool path (the onboarding) ---------------------------

    async def request_token(self, credentials: Credentials) -> Token:
        """A new token for ``credentials`` (AuthenticationFailed when refused), after a permit.

        The permit is the registered facility's (:meth:`token_permit`); for a facility not
        registered yet, of the budget a new facility gets, under the key its calls will spend.
        Nothing is stored: :meth:`adopt_token` makes the token the facility's once it holds
        these credentials.
        """
        try:
            await self.token_permit(credentials.hotel_id)
        except NotFound:
            key = limiter_key(
                credentials.hotel_id,
                credentials.username,
                by_account=self.policy.limit_by_account,
            )
            await self._acquire(key, Limits(), Priority.INTERACTIVE)
        return await self.kross.get_token(credentials)

    async def adopt_token(self, hotel_id: str, token: Token, obtained_at: datetime) -> None:
        """Make ``token``, issued for the credentials the facility now holds, its token.

        A token is a session upstream (50 at most per facility): the one that proved the
        credentials serves instead of a second one. Answers read with older credentials go.
        """
        await self.tokens.adopt(hotel_id, token, obtained_at)
        await self.cache.invalidate(hotel_id)

    async def facility_token(self, hotel_id: str) -> Token:
        """The registered facility's token: the one held, a new one only when none is valid."""
        return await self.tokens.token(hotel_id)

    async def _token(self, facility: FacilityView, priority: Priority) -> Any:
        try:
            token = await self.tokens.token(facility.hotel_id)
        except kross.AuthenticationFailed as error:
            # The failed request was an authentication attempt: the next one waits an interval.
            self.call_log.upstream_failed(facility.id, error.code)
            await self.facilities.record_auth_attempt(facility.hotel_id)
            await self.facilities.mark_error(facility.hotel_id, error.message, cause=CAUSE_REFUSED)
            log.warning(
                "pms_auth_failed",
                hotel_id=facility.hotel_id,
                status=error.status,
                upstream_code=error.upstream_code,
                ruid=error.ruid,
            )
            raise auth_failed(error.message) from None
        if facility.status == "error":
            await self.facilities.mark_connected(facility.hotel_id, cause=CAUSE_ACCEPTED_AGAIN)
            log.info("kross_auth_recovered", hotel_id=facility.hotel_id)
        elif facility.status == "unverified":
            # Used like connected until now: the booking system issued a token, so it is.
            await self.facilities.mark_connected(
                facility.hotel_id, cause=CAUSE_VERIFIED_ON_FIRST_USE
            )
            log.info("kross_auth_verified", hotel_id=facility.hotel_id)
        return token

    async def _guard_integration(self, facility: FacilityView) -> None:
        """Refuse calls of a facility in error, but for one re-authentication per interval.

        An ``unverified`` facility is called like a connected one: its first token request
        settles it (``connected``, or ``error`` on a refusal, in :meth:`_token`).
        """
        if facility.status != "error":
            return
        lock = self._reauth_locks.setdefault(facility.hotel_id, anyio.Lock())
        async with lock:
            current = await self.facilities.get(facility.hotel_id)
            if current.status != "error":
                return
            if not self._reauth_due(current.last_auth_attempt_at):
                raise auth_failed(current.last_error)
            await self.facilities.record_auth_attempt(facility.hotel_id)

    def _reauth_due(self, last_attempt: datetime | None) -> bool:
        if last_attempt is None:
            return True
        return self.clock.now() - last_attempt >= timedelta(seconds=self.policy.reauth_interval_s)

    # --- writes -----------------------------------------------------------------------------

    async def write_once(
        self, facility: FacilityView, op: Operation, payload: Mapping[str, Any]
    ) -> KrossResult:
        """Send a write exactly once; failures are raised as upstream errors, not retried."""
        if op.kind != "write":
            raise ValueError(f"{op.name} is not a write")
        return await self._send(facility, op, payload, Priority.INTERACTIVE, _TokenRetry())
