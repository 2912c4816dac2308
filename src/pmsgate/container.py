"""The composition root: the one container of a process and the one function that builds it.

:func:`open_container` builds everything one process runs on, once — one database
engine (its schema checked, or migrated), Redis, the vault, the upstream clients and the
services of every bounded context — and closes it all on exit. Every entry point uses it
the same way: ``pmsgate serve`` (through :func:`pmsgate.app.create_app`), each CLI command
group, the demo, the benchmarks and the tests' fixtures. The overrides (``kross_http``,
``http_factory``, ``clock``, ``sleep``) are the seams tests and the demo use to reach the
emulators and drive time; production passes none of them.

Only entry points import this module. Code below takes the attribute it needs
(``container.gateway``, ``container.customers``, ``container.web``,
``container.onboarding``, or one service of them) as an argument; each of those types
lives in its own package (``gateway/context.py``, ``customers/context.py``,
``web/context.py``, ``onboarding/context.py``) and is never opened on its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import httpx
import structlog
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock, SystemClock
from pmsgate.config import Settings
from pmsgate.customers.context import (
    CustomerServices,
    HttpFactory,
    Sleep,
    default_http_factory,
)
from pmsgate.errors import PmsgateError
from pmsgate.gateway.cache import ReadCache
from pmsgate.gateway.call_log import CallLog
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.key_cache import KeyChanges
from pmsgate.gateway.limiter import FacilityLimiter, account_of
from pmsgate.gateway.locks import liveness_for, locks_for
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.gateway.oauth_external import ExternalTokenCheck
from pmsgate.gateway.oauth_tokens import BearerAuth, OAuthTokenCheck, TokenCheck
from pmsgate.gateway.operations import Operations
from pmsgate.gateway.service import Gateway, GatewayPolicy
from pmsgate.gateway.shared_state import RedisHealth
from pmsgate.gateway.tokens import TokenManager
from pmsgate.gateway.tools import Tools
from pmsgate.gateway.tracing import Tracing, tracing_from_settings
from pmsgate.gateway.usage import UsageCounter, UsageHistory
from pmsgate.gateway.vault import Vault, VaultKeyCheck, vault_from_settings
from pmsgate.gateway.window import WindowPolicy
from pmsgate.gateway.write_records import WriteRecords
from pmsgate.integrations.assistant.client import AssistantClient
from pmsgate.integrations.kross.client import KrossClient
from pmsgate.jobs.notify import ReconnectLinkMailer
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.knowledge.sync_jobs import SyncJobs
from pmsgate.oauth.server import AuthorizationServer
from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.records import OnboardingRecords
from pmsgate.ratelimit import ClockTime, TimeReference
from pmsgate.storage.db import (
    SchemaMismatch,
    SchemaStatus,
    open_database,
    prepare_schema,
    session_factory,
)
from pmsgate.web.context import WebServices
from pmsgate.web.form_tokens import FormTokens
from pmsgate.web.incidents import IncidentService
from pmsgate.web.invitations import Invitations
from pmsgate.web.users import UserService
from pmsgate.webhooks.delivery import WebhookDeliverer
from pmsgate.webhooks.service import WebhookService

log = structlog.get_logger(__name__)


class SchemaError(PmsgateError):
    """This release cannot run on the database's schema; the message is the whole story.

    One line (a start-up prints it as is, without a separate hint): the database's revision,
    this release's, and what to do — migrate (``schema_outdated``), or deploy the newer
    release / restore the backup (``schema_incompatible``, ``schema_unknown``).
    """

    code = "schema_outdated"
    status = 503
    hint = ""


def schema_error(mismatch: SchemaMismatch) -> SchemaError:
    """The service's words for a schema this release cannot run on (docs/deploy.md)."""
    if mismatch.kind == "outdated":
        at = mismatch.current or "none (an empty database)"
        return SchemaError(
            f"The database is at revision {at}, this release needs {mismatch.head}: run "
            "`pmsgate db upgrade` (or set PMSGATE_MIGRATE_ON_START=true to migrate at start).",
            code="schema_outdated",
        )
    if mismatch.kind == "incompatible":
        breaking = ", ".join(mismatch.breaking)
        return SchemaError(
            f"The database is at revision {mismatch.current}; migration {breaking} is not "
            f"backward compatible, so this release (revision {mismatch.head}) cannot run on "
            f"it: deploy a release with migration {mismatch.breaking[-1]} or newer, or restore "
            "the backup taken before the upgrade (docs/deploy.md, Rolling back).",
            code="schema_incompatible",
        )
    return SchemaError(
        f"The database is at revision {mismatch.current}, which this release (revision "
        f"{mismatch.head}) does not know, and it records nothing of its compatibility: "
        "deploy the release that migrated it, or restore the backup taken before the upgrade "
        "(docs/deploy.md, Rolling back).",
        code="schema_unknown",
    )


async def prepare_database(
    engine: AsyncEngine, *, migrate: bool, script_location: Path | None = None
) -> SchemaStatus:
    """:func:`pmsgate.storage.db.prepare_schema`, a refusal as a :class:`SchemaError`."""
    try:
        status = await prepare_schema(engine, migrate=migrate, script_location=script_location)
    except SchemaMismatch as mismatch:
        raise schema_error(mismatch) from None
    if status.newer:  # a rollback by image, most likely: worth one line in the log
        log.warning(
            "schema_newer_than_release",
            revision=status.current,
            release_revision=status.head,
            newer=list(status.newer),
        )
    return status


@dataclass(frozen=True)
class Foundations:
    """What every service of the process is built on (opened first, closed last)."""

    settings: Settings
    clock: Clock
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    redis: Redis | None
    vault: Vault


@dataclass(frozen=True)
class Container(Foundations):
    """Everything one process runs on, built once by :func:`open_container`."""

    gateway: GatewayServices
    customers: CustomerServices
    web: WebServices
    onboarding: OnboardingServices
    audit: AuditTrail
    # Do the configured vault keys read the stored secrets? (`/readyz`, cached a while)
    vault_keys: VaultKeyCheck
    # pmsgate's OAuth authorization server (docs/oauth.md); None when PMSGATE_OAUTH_ENABLED is
    # off or an external one issues the tokens (PMSGATE_OAUTH_EXTERNAL_ISSUER).
    oauth: AuthorizationServer | None = None


def open_redis(settings: Settings) -> Redis | None:
    """The shared Redis client, or None when no Redis is configured.

    Short timeouts and one quick retry (redis-py's own ``Retry``: a connection dropped by a
    Redis restart is re-opened once, at once), so an outage is noticed within about
    ``redis_timeout_s`` instead of after redis-py's default ten retries with backoff.
    """
    if not settings.redis_url:
        return None
    return Redis.from_url(
        settings.redis_url,
        socket_connect_timeout=settings.redis_timeout_s,
        socket_timeout=settings.redis_timeout_s,
        retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), retries=1),
    )


def upstream_history(
    usage: UsageHistory, facilities: FacilityService
) -> Callable[[str, datetime], Awaitable[list[tuple[datetime, int]]]]:
    """The limiter's memory of a key's upstream requests per hour since a time (the database's).

    A key is a hotel_id, or an API account's (:func:`~pmsgate.gateway.limiter.limiter_key`,
    when the budget is per account: then the hours of every facility of that account add up).
    """

    async def history(key: str, since: datetime) -> list[tuple[datetime, int]]:
        username = account_of(key)
        if username is not None:
            hotel_ids = [f.hotel_id for f in await facilities.list() if f.username == username]
        else:
            hotel_ids = [key]
        hours: dict[datetime, int] = {}
        for hotel_id in hotel_ids:
            for row in await usage.series(hotel_id, since, since + timedelta(days=2)):
                if row.upstream_calls:
                    hours[row.hour] = hours.get(row.hour, 0) + row.upstream_calls
        return sorted(hours.items())

    return history


@asynccontextmanager
async def open_container(
    settings: Settings,
    *,
    kross_http: httpx.AsyncClient | None = None,
    http_factory: HttpFactory | None = None,
    clock: Clock | None = None,
    sleep: Sleep = anyio.sleep,
    tracing: Tracing | None = None,
    migrate: bool | None = None,
    shared_clock: Clock | None = None,
) -> AsyncIterator[Container]:
    """Build the process's container from the settings; close everything on exit.

    The database's schema is checked first (:func:`prepare_database`): a schema older than
    this release, or newer and not compatible, ends it with a :class:`SchemaError`.
    ``migrate`` applies pending migrations instead (under the migration lock); unset,
    PMSGATE_MIGRATE_ON_START decides (``serve``, the demo, tests). Commands that must never
    migrate (every CLI command but `db upgrade`) pass ``False``.

    ``kross_http`` is the booking-system client's httpx client (default: one from
    ``http_factory`` when given, else a real one); ``http_factory`` makes the other
    upstreams' clients (platform, notes); ``clock`` and ``sleep`` drive time; ``tracing``
    the process's traces (default: from the settings, none unless configured).
    ``shared_clock`` is the clock the replicas agree on for the limiter's shared windows
    (docs/gateway.md): by default the Redis server's TIME when the process runs on the
    system clock, and the injected ``clock`` when one is given (tests and the demo run
    every replica and emulator on one simulated clock, which Redis's TIME would not follow).
    """
    agreed = shared_clock or clock
    reference = ClockTime(agreed) if agreed is not None else None
    clock = clock or SystemClock()
    factory = http_factory or default_http_factory
    async with AsyncExitStack() as stack:
        engine = await stack.enter_async_context(
            open_database(settings.effective_database_url, migrate=False)
        )
        await prepare_database(
            engine, migrate=settings.migrates_on_start if migrate is None else migrate
        )
        sessions = session_factory(engine)
        redis = open_redis(settings)
        if redis is not None:
            stack.push_async_callback(redis.aclose)
        if kross_http is None:
            kross_http = await stack.enter_async_context(
                http_factory()
                if http_factory is not None
                else httpx.AsyncClient(timeout=settings.kross_timeout_s)
            )
        vault = vault_from_settings(settings)
        base = Foundations(settings, clock, engine, sessions, redis, vault)
        tracing = _open_tracing(stack, settings, tracing, kross_http)
        # One registry for the process's /metrics: the gateway's, the audit trail's and the
        # knowledge-sync jobs' signals (docs/operations.md, "What to watch").
        metrics = GatewayMetrics()
        audit = AuditTrail(
            sessions,
            clock,
            retention_days=settings.audit_retention_days,
            observer=metrics.audit_recorded,
        )
        gateway = await _open_gateway(stack, base, kross_http, audit, metrics, tracing, reference)
        customers = CustomerServices(
            settings=settings,
            clock=clock,
            sessions=sessions,
            vault=vault,
            facilities=gateway.facilities,
            assistant=_open_assistant(stack, settings, factory, clock, sleep),
            http_factory=factory,
            sleep=sleep,
        )
        yield await _open_services(stack, base, gateway, customers, audit, metrics, sleep)


def _open_tracing(
    stack: AsyncExitStack,
    settings: Settings,
    tracing: Tracing | None,
    kross_http: httpx.AsyncClient,
) -> Tracing | None:
    """Traces of the gateway -> booking system path, when configured (docs/operations.md)."""
    tracing = tracing or tracing_from_settings(settings)
    if tracing is not None:
        stack.callback(tracing.shutdown)
        tracing.instrument(kross_http)
    return tracing


def _open_assistant(
    stack: AsyncExitStack, settings: Settings, factory: HttpFactory, clock: Clock, sleep: Sleep
) -> AssistantClient | None:
    """The assistant platform's client, when its token is configured (closed by ``stack``)."""
    if settings.assistant_api_token is None:
        return None
    assistant_http = factory()
    stack.push_async_callback(assistant_http.aclose)
    return AssistantClient.from_settings(settings, assistant_http, clock=clock, sleep=sleep)


async def _open_services(
    stack: AsyncExitStack,
    base: Foundations,
    gateway: GatewayServices,
    customers: CustomerServices,
    audit: AuditTrail,
    metrics: GatewayMetrics,
    sleep: Sleep,
) -> Container:
    """The container: the knowledge sync, the web app's and the onboarding's services on the
    gateway and customer services (what needs closing is closed by ``stack``)."""
    settings, clock, sessions, vault = base.settings, base.clock, base.sessions, base.vault
    knowledge_repo = KnowledgeSyncRecords(sessions, clock)
    knowledge = KnowledgeSync(customers, knowledge_repo, clock=clock, sleep=sleep)
    sync_jobs = await stack.enter_async_context(
        SyncJobs(knowledge, knowledge_repo, clock=clock, metrics=metrics)
    )
    users = UserService(
        sessions, clock=clock, settings=settings, redis=base.redis, health=gateway.redis_health
    )
    invitations = Invitations(
        users=users, customers=customers, audit=audit, settings=settings, clock=clock
    )
    # The console's incidents; "resend" goes through the notifier's own message.
    incidents = IncidentService(
        sessions,
        clock=clock,
        settings=settings,
        gateway=gateway,
        customers=customers,
        users=users,
        invitations=invitations,
        audit=audit,
        link_mailer=ReconnectLinkMailer(
            sessions, clock=clock, settings=settings, audit=audit, users=users
        ),
    )
    # Signed event webhooks: subscriptions and their secrets (docs/webhooks.md).
    webhooks = WebhookService(sessions, clock=clock, settings=settings, vault=vault, audit=audit)
    return Container(
        **vars(base),
        gateway=gateway,
        customers=customers,
        web=WebServices(
            gateway=gateway,
            customers=customers,
            sync_jobs=sync_jobs,
            users=users,
            audit=audit,
            invitations=invitations,
            incidents=incidents,
            # One-time tokens of the console's creating forms (docs/web.md).
            form_tokens=FormTokens(sessions, clock=clock, settings=settings, vault=vault),
            webhooks=webhooks,
            webhook_deliverer=WebhookDeliverer(
                sessions,
                clock=clock,
                settings=settings,
                service=webhooks,
                audit=audit,
                http=await stack.enter_async_context(
                    httpx.AsyncClient(timeout=settings.webhook_timeout_s, follow_redirects=False)
                ),
            ),
        ),
        onboarding=OnboardingServices(
            settings=settings,
            clock=clock,
            customers=customers,
            facilities=gateway.facilities,
            gateway=gateway.gateway,
            knowledge=knowledge,
            repository=OnboardingRecords(sessions, clock),
            audit=audit,
            accounts=invitations,
        ),
        audit=audit,
        vault_keys=VaultKeyCheck(sessions, vault, clock),
        oauth=AuthorizationServer(sessions, clock, settings, audit, gateway.bearer.tokens)
        if isinstance(gateway.bearer.tokens, OAuthTokenCheck)
        else None,
    )


async def _open_gateway(
    stack: AsyncExitStack,
    base: Foundations,
    kross_http: httpx.AsyncClient,
    audit: AuditTrail,
    metrics: GatewayMetrics,
    tracing: Tracing | None,
    reference: TimeReference | None = None,
) -> GatewayServices:
    """The gateway's services on the container's engine, Redis and vault (closed by ``stack``)."""
    settings, clock, sessions, redis = base.settings, base.clock, base.sessions, base.redis
    health = RedisHealth(
        clock, retry_interval_s=settings.redis_retry_interval_s, gauge=metrics.redis_up
    )
    usage = UsageCounter(clock, redis=redis, health=health, namespace=settings.redis_namespace)
    stack.push_async_callback(usage.settle)  # the last tick's counts reach Redis
    facilities = await _open_facilities(stack, base, audit)
    # Every request to the booking system is timed (pmsgate_upstream_request_seconds).
    kross_client = KrossClient.from_settings(
        settings, kross_http, clock, observer=metrics.observe_upstream
    )
    limiter = _open_limiter(base, health, facilities, reference)
    stack.push_async_callback(limiter.aclose)
    cache = await _open_cache(stack, base, health)
    tokens = TokenManager(
        kross=kross_client,
        sessions=sessions,
        vault=base.vault,
        clock=clock,
        credentials=facilities.credentials,
        acquire_permit=lambda hotel_id: gateway.token_permit(hotel_id),
        locks=locks_for(
            redis,
            namespace=settings.redis_namespace,
            timeout_s=settings.token_lock_timeout_s,
            wait_s=settings.token_lock_wait_s,
        ),
        refresh_ahead_s=settings.token_refresh_ahead_s,
        health=health,
    )
    # Buffered in memory, written on the usage-flush tick (pmsgate.gateway.call_log).
    call_log = CallLog(
        clock,
        sessions,
        retention_days=settings.tool_call_log_retention_days,
        max_rows_per_facility=settings.tool_call_log_max_per_facility,
    )
    gateway = Gateway(
        facilities=facilities,
        kross_client=kross_client,
        tokens=tokens,
        limiter=limiter,
        cache=cache,
        clock=clock,
        metrics=metrics,
        usage=usage,
        call_log=call_log,
        policy=GatewayPolicy.from_settings(settings),
        tracing=tracing,
    )
    stack.push_async_callback(gateway.aclose)
    # Which gateway processes run: a write left in flight by a dead one is settled at once.
    liveness = await liveness_for(redis, namespace=settings.redis_namespace)
    stack.push_async_callback(liveness.aclose)
    return GatewayServices(
        settings=settings,
        clock=clock,
        engine=base.engine,
        redis=redis,
        redis_health=health,
        facilities=facilities,
        kross=kross_client,
        limiter=limiter,
        cache=cache,
        tokens=tokens,
        gateway=gateway,
        tools=Tools(
            gateway,
            settings.cache_max_age_s,
            settings.cache_default_max_age_s,
            window=WindowPolicy.from_settings(settings),
        ),
        operations=Operations(
            gateway,
            WriteRecords(sessions),
            liveness=liveness,
            audit=audit,  # each write recorded as key.used_for_write
        ),
        metrics=metrics,
        usage=usage,
        bearer=await _open_bearer(stack, base, facilities),
        tracing=tracing,
    )


async def _open_bearer(
    stack: AsyncExitStack, base: Foundations, facilities: FacilityService
) -> BearerAuth:
    """The bearer check of /v1 and /mcp: gateway keys the old way; access tokens of pmsgate's
    own authorization server, or an external one's JWTs (docs/oauth.md), remembered like keys."""
    settings = base.settings
    tokens: TokenCheck | None = None
    if settings.oauth_external_issuer and settings.oauth_external_jwks_url:
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=10.0))
        tokens = ExternalTokenCheck(
            base.sessions,
            base.clock,
            http,
            issuer=settings.oauth_external_issuer,
            jwks_url=settings.oauth_external_jwks_url,
            facility_claim=settings.oauth_external_facility_claim,
            cache_s=settings.gateway_key_cache_s,
        )
    elif settings.oauth_enabled:
        tokens = OAuthTokenCheck(
            base.sessions,
            base.clock,
            cache_s=settings.gateway_key_cache_s,
            key_changes=facilities.key_changes,
        )
    return BearerAuth(facilities.authenticate, tokens, public_url=settings.gateway_public_url)


async def _open_facilities(
    stack: AsyncExitStack, base: Foundations, audit: AuditTrail
) -> FacilityService:
    """The facility service, its key checks told of every replica's key changes."""
    # Key revocations, scopes and expiries reach every replica's key cache at once (Redis).
    key_changes = await stack.enter_async_context(
        KeyChanges(
            base.redis,
            namespace=base.settings.redis_namespace,
            retry_interval_s=base.settings.redis_retry_interval_s,
        )
    )
    return FacilityService(
        base.sessions,
        base.vault,
        base.clock,
        base.settings.partner_api_key,
        key_cache_s=base.settings.gateway_key_cache_s,
        audit=audit,
        key_changes=key_changes,
    )


def _open_limiter(
    base: Foundations,
    health: RedisHealth,
    facilities: FacilityService,
    reference: TimeReference | None,
) -> FacilityLimiter:
    """The facilities' upstream budgets (Redis-held when configured)."""
    settings, clock, redis = base.settings, base.clock, base.redis
    return FacilityLimiter(
        clock=clock,
        redis=redis,
        namespace=settings.redis_namespace,
        background_share=settings.limiter_background_share,
        edge_margin_s=settings.limiter_edge_margin_s,
        health=health,
        outage_share=settings.limiter_outage_share,
        history=upstream_history(UsageHistory(base.sessions), facilities),
        reference=reference,
        clock_sync_s=settings.limiter_clock_sync_s,
    )


async def _open_cache(stack: AsyncExitStack, base: Foundations, health: RedisHealth) -> ReadCache:
    """The read cache (Redis-held when configured; closed by ``stack``)."""
    settings, clock = base.settings, base.clock
    cache = ReadCache(
        clock=clock,
        redis_url=settings.redis_url,
        namespace=settings.redis_namespace,
        keep_s=settings.cache_keep_s,
        lock_ttl_s=settings.cache_lock_ttl_s,
        max_entries=settings.cache_max_entries,
        max_parsed=settings.cache_max_parsed,
        health=health,
        redis_timeout_s=settings.redis_timeout_s,
        trust_s=settings.cache_trust_s,
    )
    stack.push_async_callback(cache.close)
    # Other replicas' cache writes heard at once: a hit costs no Redis round trip.
    await cache.listen(base.redis, retry_interval_s=settings.redis_retry_interval_s)
    return cache
