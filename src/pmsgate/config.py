"""Settings read from the environment (prefix ``PMSGATE_``).

Nothing here builds a settings object at import time: call :func:`get_settings`
(cached) from entry points, or construct :class:`Settings` explicitly in tests.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

log = logging.getLogger(__name__)

# The deprecated interval settings (removed in the next release) → the job each one sets.
# Settings renamed to the one word per upstream (docs/architecture.md, Glossary): the old
# environment name is still read for one release, with a warning naming the new one.
RENAMED_SETTINGS = {
    "PMSGATE_PLATFORM_API_URL": "PMSGATE_ASSISTANT_API_URL",
    "PMSGATE_PLATFORM_API_TOKEN": "PMSGATE_ASSISTANT_API_TOKEN",
    "PMSGATE_NOTES_API_URL": "PMSGATE_NOTION_API_URL",
    "PMSGATE_NOTES_VERSION": "PMSGATE_NOTION_VERSION",
    "PMSGATE_NOTES_REQUESTS_PER_SECOND": "PMSGATE_NOTION_REQUESTS_PER_SECOND",
    "PMSGATE_NOTES_TIMEOUT_S": "PMSGATE_NOTION_TIMEOUT_S",
}

DEPRECATED_JOB_INTERVALS = {
    "usage_refresh_interval_s": "refresh-usage",
    "usage_flush_interval_s": "flush-gateway-usage",
    "pms_check_interval_s": "check-connections",
    "listings_sync_interval_s": "restart-listings-syncs",
}


def _renamed(name: str) -> AliasChoices:
    """The environment names a renamed setting is read under: ``name``, then its old one."""
    (old,) = (old for old, new in RENAMED_SETTINGS.items() if new == name)
    return AliasChoices(name, old)


def _deprecated_interval(job: str) -> Any:
    """A deprecated interval setting (DEPRECATED_JOB_INTERVALS): unset unless given."""
    return Field(
        default=None, description=f'Deprecated: use PMSGATE_JOB_INTERVALS_S={{"{job}": …}}.'
    )


# What an http(s) base URL setting says when it is not one.
_BASE_URL_EXAMPLES = {
    "public_url": "use an http(s):// base URL, e.g. https://console.example.com",
    "otel_endpoint": "write the collector's base URL, e.g. http://otel-collector:4318",
}

# A count of at least one (pydantic's PositiveInt would say "greater than 0" instead).
AtLeastOne = Annotated[int, Field(ge=1)]

DEFAULT_USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0 Safari/537.36 pmsgate/0.1"
)


class Settings(BaseSettings):
    """Every knob of the service; each field maps to one ``PMSGATE_*`` variable."""

    model_config = SettingsConfigDict(
        env_prefix="PMSGATE_",
        env_nested_delimiter="__",
        extra="ignore",
        # the renamed settings (RENAMED_SETTINGS) are read by field name as well
        populate_by_name=True,
    )

    data_dir: Path = Field(
        default=Path(".pmsgate"),
        description="Directory for local state (the default SQLite file, the onboarding outbox).",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy async URL; default is SQLite at <data_dir>/pmsgate.db. "
        "Use postgresql+asyncpg://… in production.",
    )
    migrate_on_start: bool | None = Field(
        default=None,
        description="Whether `serve` and `demo` apply pending migrations at start (under a "
        "database lock) instead of refusing a database older than this release. Unset: true "
        "for the embedded SQLite (PMSGATE_DATABASE_URL unset or sqlite), false for a database "
        "server (run `pmsgate db upgrade`, the migration Job, first). Other commands never "
        "migrate.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL shared by replicas (limiter, cache, locks); unset = in memory.",
    )
    redis_namespace: str = Field(
        default="pmsgate",
        min_length=1,
        description="Prefix of every Redis key, so several deployments can share one Redis.",
    )
    redis_timeout_s: PositiveFloat = Field(
        default=1.0,
        description="Connect and read timeout of one Redis command, in seconds: an outage is "
        "noticed after this long, not after a long hang (the gateway then runs on its "
        "fallbacks; docs/gateway.md, When Redis is away).",
    )
    redis_retry_interval_s: PositiveFloat = Field(
        default=2.0,
        description="While Redis is unreachable, try it again at most this often (one call "
        "per interval probes it; the others use the fallbacks without waiting).",
    )
    kross_base_url: str = Field(
        default="https://api.krossbooking.com",
        description="Booking-system base URL; operations are POSTed to <base>/v5/<path>.",
    )
    kross_paths: dict[str, str] = Field(
        default_factory=dict,
        description='JSON map overriding operation paths, e.g. {"get-house-manual": '
        '"reservations/get-house-manual"}.',
    )
    kross_timeout_s: float = Field(
        default=20.0, description="Timeout of one booking-system request, in seconds."
    )
    user_agent: str = Field(
        default=DEFAULT_USER_AGENT,
        description="Browser-style User-Agent sent on every booking-system request.",
    )
    partner_api_key: SecretStr | None = Field(
        default=None,
        description="The shared partner api_key (32 hex) used for facilities of kind partner.",
    )
    secret_keys: SecretStr | None = Field(
        default=None,
        description="Vault keys, comma-separated `id:base64key` (32-byte AES keys); "
        "the first encrypts, all decrypt.",
    )
    admin_token: SecretStr | None = Field(
        default=None, description="Bearer token of the admin HTTP API."
    )
    # --- the operational endpoints (docs/operations.md) ---
    admin_allow_plain_http: bool = Field(
        default=False,
        description="Let the admin API answer plain HTTP from other machines (default: only "
        "HTTPS, or plain HTTP from this machine; behind a proxy, list it in "
        "PMSGATE_FORWARDED_ALLOW_IPS so its X-Forwarded-Proto counts).",
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="Addresses of the reverse proxies whose X-Forwarded-For/-Proto `pmsgate "
        "serve` trusts (comma-separated; * only behind a private load balancer): the client "
        "address, and HTTPS for the admin API and the session cookie. The serve option "
        "--forwarded-allow-ips (or FORWARDED_ALLOW_IPS) overrides it.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="Bearer token /metrics requires (Authorization: Bearer …); unset = "
        "/metrics answers only callers on this machine (or see metrics_address).",
    )
    metrics_address: str | None = Field(
        default=None,
        description="host:port of a separate listener `pmsgate serve` starts for /metrics "
        "(e.g. 127.0.0.1:9464); the main address then has no /metrics at all. An address "
        "beyond this machine (0.0.0.0:9464, a pod's or a host's interface) requires "
        "metrics_token as well.",
    )
    otel_endpoint: str | None = Field(
        default=None,
        description="Base URL of an OTLP/HTTP collector (e.g. http://otel-collector:4318) "
        "traces of the gateway -> booking system path are sent to (<it>/v1/traces); needs "
        "the optional extra pmsgate[otel]. OTEL_EXPORTER_OTLP_ENDPOINT turns them on too. "
        "Unset = no traces.",
    )
    api_docs: bool = Field(
        default=True,
        description="Serve /docs, /redoc and /openapi.json (turn off in production if the API "
        "description should not be public).",
    )
    gateway_public_url: str | None = Field(
        default=None,
        description="The gateway's base URL as the assistant platform's custom tools reach it "
        "(e.g. https://gateway.example.com); onboarding stores it as the workspace secret "
        "PMSGATE_GATEWAY_URL.",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Web origins (scheme://host[:port], comma-separated) whose pages may call "
        "/mcp; a request with another Origin header gets 403 origin_not_allowed, one without "
        "(a server) is served. None by default (docs/gateway.md, MCP).",
    )
    # --- tokens, limiter, read cache (gateway) ---
    token_refresh_ahead_s: NonNegativeFloat = Field(
        default=3600.0,
        description="Get a facility's new booking-system token this many seconds before the "
        "current one expires (never earlier than half-way through its lifetime).",
    )
    token_lock_timeout_s: PositiveFloat = Field(
        default=30.0,
        description="A replica's token-refresh lock expires after this many seconds even if it "
        "crashed while holding it.",
    )
    token_lock_wait_s: PositiveFloat = Field(
        default=30.0,
        description="How long a replica waits for another replica's token refresh before "
        "answering gateway_busy.",
    )
    limiter_scope: Literal["facility", "account"] = Field(
        default="facility",
        description="What one upstream budget covers: `facility` (per hotel_id) or "
        "`account` (one budget for every facility of the same API account, as one integrator "
        "reports for the per-minute limit).",
    )
    limiter_wait_s: NonNegativeFloat = Field(
        default=2.0,
        description="How long an interactive call may wait for a permit before the gateway "
        "answers from the cache (stale) or with 429 and Retry-After.",
    )
    limiter_background_share: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Share of each window (minute, hour, day) that background work (refreshes "
        "ahead of need, the jobs' checks) may use, rounded down: 0.3 is 3 of 10 a minute, 90 of "
        "300 an hour, 1,500 of 5,000 a day; the rest is reserved for interactive calls, and "
        "background work yields while an interactive call waits for a permit.",
    )
    limiter_edge_margin_s: float = Field(
        default=0.5,
        ge=0,
        lt=60,
        description="Every limiter window is widened by this many seconds: the error of the "
        "replicas' measured clock offsets (half a round trip to Redis) and network jitter, "
        "which could push a request into the booking system's next window.",
    )
    limiter_clock_sync_s: PositiveFloat = Field(
        default=60.0,
        description="How often each replica measures its clock's offset to the Redis server's "
        "TIME again; shared limiter windows are stamped and judged on that one clock, so "
        "replicas whose clocks are seconds apart never exceed a limit together.",
    )
    limiter_outage_share: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="While Redis is unreachable (and for a minute after it is back), each "
        "replica may use this share of what every window (minute, hour, day) had left when it "
        "last saw it in Redis. Keep it at most 1/N for N replicas (the default suits up to 4). "
        "The permits are written into the shared window when Redis is back.",
    )
    cache_max_age_s: dict[str, float] = Field(
        default_factory=dict,
        description="Overrides of each tool's freshness bound, in seconds: a cached answer older "
        'than this is fetched again. JSON map, e.g. {"check-availability": 60}; a tool not '
        "listed uses the `cache_max_age_s` of its declaration in catalogue/tools.yaml (300 s "
        "for availability, 120 s for one reservation, 3600 s for check-in instructions).",
    )
    cache_default_max_age_s: NonNegativeFloat = Field(
        default=120.0,
        description="Freshness bound, in seconds, of a tool that neither cache_max_age_s nor its "
        "declaration in catalogue/tools.yaml gives one.",
    )
    cache_keep_s: PositiveFloat = Field(
        default=86400.0,
        description="How long a cached answer is kept as the last good answer to serve (marked "
        "stale) when the upstream fails or the budget is spent.",
    )
    cache_max_entries: AtLeastOne = Field(
        default=10_000,
        description="Cached answers a replica holds in memory, least recently used dropped first "
        "(several per facility: its reservation window, availability, single reservations). "
        "With Redis they are also in Redis; without, this is the whole cache. Bounds the "
        "replica's memory: docs/deploy.md, Sizing.",
    )
    cache_max_parsed: AtLeastOne = Field(
        default=1_000,
        description="Cached windows a replica also keeps parsed (≈ 1 per facility in use, the "
        "largest part of its memory), least recently used dropped first; a window not held "
        "is parsed again on its next call. Bounds the replica's memory: docs/deploy.md, Sizing.",
    )
    cache_trust_s: NonNegativeFloat = Field(
        default=2.0,
        description="With Redis: how long a replica serves a cached entry it holds without "
        "asking Redis whether it is still the latest, while it hears the other replicas' "
        "cache changes (Redis pub/sub; a change arrives at once). Bounds how long a lost "
        "message can go unseen; 0 asks Redis on every hit. docs/gateway.md, The read cache.",
    )
    cache_lock_ttl_s: PositiveFloat = Field(
        default=30.0,
        description="A replica's lock on one cache refill expires after this many seconds.",
    )
    cache_refresh_ahead_ratio: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="A cached answer older than this share of its freshness bound is refreshed "
        "in the background (at background priority) when it is served; 1 turns it off.",
    )
    window_booked_days: AtLeastOne = Field(
        default=400,
        description="The reservation window asks the booking system for reservations booked "
        "(created) in the last this many days: the only date filter public clients send "
        "(date_reservation_from). 400 covers a stay up to a year ahead booked today and a "
        "guest of the last month who booked up to a year before; stay dates are always "
        "checked by the gateway.",
    )
    window_max_pages: AtLeastOne = Field(
        default=20,
        description="At most this many reservations/get-list pages per refresh of a facility's "
        "reservation window (the budget share below usually binds first).",
    )
    window_budget_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Share of the facility's per-minute limit one reservation-window refresh may "
        "spend (token and retries included; at least one page): with 10/min and 0.5, at most 5 "
        "requests. A window cut short is served with meta.truncated.",
    )
    gateway_key_cache_s: NonNegativeFloat = Field(
        default=5.0,
        description="How long a process remembers a checked gateway key (and its facility), so "
        "a cached tool call needs no database query; a key revoked or a facility changed by "
        "another process is seen up to this late (0 = check the database on every call).",
    )
    # --- OAuth 2.1 for /mcp and /v1 (docs/oauth.md) ---
    oauth_enabled: bool = Field(
        default=True,
        description="Serve pmsgate's own OAuth authorization server (metadata, /oauth/*, the "
        "consent page) and accept its access tokens on /mcp and /v1; gateway keys work "
        "either way.",
    )
    oauth_client_registration: bool | None = Field(
        default=None,
        description="Let any app register itself (Dynamic Client Registration, RFC 7591, at "
        "/oauth/register). Unset: on with the embedded SQLite database (development, the "
        "demo, the sandbox), off with a database server (PMSGATE_DATABASE_URL on "
        "PostgreSQL: production) — there, set it to true to let assistant apps connect "
        "with the server URL alone.",
    )
    oauth_access_token_ttl_s: float = Field(
        default=3600.0,
        ge=60,
        le=86_400,
        description="How long an OAuth access token is valid (the app refreshes it).",
    )
    oauth_refresh_token_ttl_s: float = Field(
        default=30 * 86_400.0,
        ge=3600,
        le=365 * 86_400.0,
        description="How long an OAuth refresh token is valid; each refresh rotates it.",
    )
    oauth_code_ttl_s: float = Field(
        default=600.0,
        ge=30,
        le=3600,
        description="How long an authorization request waits for the user's consent, and its "
        "code for the app's exchange.",
    )
    oauth_external_issuer: str | None = Field(
        default=None,
        description="An external authorization server's issuer (with "
        "PMSGATE_OAUTH_EXTERNAL_JWKS_URL): pmsgate then issues no tokens, its resource "
        "metadata names this issuer, and access tokens are its JWTs (iss, aud, exp, scope and "
        "the facility claim checked; docs/oauth.md). Unset: pmsgate's own server.",
    )
    oauth_external_jwks_url: str | None = Field(
        default=None,
        description="Where the external authorization server publishes its signing keys (JWKS).",
    )
    oauth_external_facility_claim: str = Field(
        default="pmsgate_facility",
        min_length=1,
        max_length=100,
        description="The JWT claim of an external server's token naming the facility (its "
        "hotel_id).",
    )
    max_body_bytes: AtLeastOne = Field(
        default=1024 * 1024,
        description="The largest request body any route accepts, in bytes (larger: 413 "
        "payload_too_large, refused before it is read whole).",
    )
    max_upload_body_bytes: AtLeastOne = Field(
        default=72 * 1024 * 1024,
        description="The largest body of POST /v1/operations/save-guest-pictures, in bytes: "
        "10 pictures of 5 MiB, base64-encoded, with room for the JSON around them.",
    )
    reauth_interval_s: PositiveFloat = Field(
        default=900.0,
        description="After the booking system refuses a facility's credentials, at most one "
        "re-authentication attempt per this many seconds (no retry storm that locks the account).",
    )
    # --- assistant platform (docs/assistant-api.md) ---
    assistant_api_url: str = Field(
        validation_alias=_renamed("PMSGATE_ASSISTANT_API_URL"),
        default="https://api.assistant.example",
        description="Assistant-platform base URL WITHOUT /v1 (the client appends /v1/…); "
        "a placeholder by default, the sandbox serves it at <sandbox>/assistant.",
    )
    assistant_api_token: SecretStr | None = Field(
        validation_alias=_renamed("PMSGATE_ASSISTANT_API_TOKEN"),
        default=None,
        description="Bearer token of the assistant-platform /v1 API (account-wide to create "
        "workspaces).",
    )
    # --- notes workspace (the Notion API, docs/knowledge-sync.md) ---
    notion_api_url: str = Field(
        validation_alias=_renamed("PMSGATE_NOTION_API_URL"),
        default="https://api.notion.com",
        description="Notes-workspace (Notion API) base URL WITHOUT /v1 (the SDK appends /v1/…); "
        "the sandbox serves it at <sandbox>/notion.",
    )
    notion_version: str = Field(
        validation_alias=_renamed("PMSGATE_NOTION_VERSION"),
        default="2025-09-03",
        description="Notion-Version header sent on every notes request (2022-06-28, 2025-09-03 "
        "or 2026-03-11); from 2025-09-03 on the apartments database is queried through its "
        "data source.",
    )
    notion_requests_per_second: PositiveFloat = Field(
        validation_alias=_renamed("PMSGATE_NOTION_REQUESTS_PER_SECOND"),
        default=3.0,
        description="Requests per second the notes client allows itself per integration token "
        "(the API averages about 3; 429 answers are still honoured).",
    )
    notion_timeout_s: PositiveFloat = Field(
        validation_alias=_renamed("PMSGATE_NOTION_TIMEOUT_S"),
        default=30.0,
        description="Timeout of one notes-workspace request, in seconds.",
    )
    # --- onboarding message (docs/requirements.md R21.16) ---
    smtp_url: SecretStr | None = Field(
        default=None,
        description="SMTP server the onboarding message is sent through, e.g. "
        "smtp://user:password@mail.example.com:587 (STARTTLS) or smtps://…:465; unset = the "
        "message is written to <data_dir>/outbox/ instead.",
    )
    mail_from: str = Field(
        default="onboarding@localhost",
        description="From address of every e-mail to customers; its display name, when given, "
        'signs them (else "Il team di {brand}" / "The {brand} team").',
    )
    brand_name: str = Field(
        default="Guest Assistant",
        min_length=1,
        max_length=80,
        description="The product name the onboarding message is branded with.",
    )
    brand_colour: str = Field(
        default="#0b3d91",
        pattern=r"^#[0-9A-Fa-f]{6}$",
        description="The brand colour of the onboarding message (#RRGGBB): its header and "
        "its sign-in button.",
    )
    support_email: str | None = Field(
        default=None,
        max_length=254,
        description="The address customers write to for help, shown on their console pages "
        "and in e-mails wherever they are told to write to us; unset = they are told to "
        "reply to our last e-mail.",
    )
    support_phone: str | None = Field(
        default=None,
        max_length=40,
        description="The phone number customers call for help (e.g. +39 02 1234 5678), shown "
        "next to PMSGATE_SUPPORT_EMAIL; unset = none shown.",
    )
    # --- incident notices (docs/operations.md, Notifications) ---
    public_url: str | None = Field(
        default=None,
        description="The console's public base URL (e.g. https://console.example.com): the "
        "address in the links of messages — the onboarding message's sign-in address, the "
        "invitation's and the password reset's one-time links, an incident notice's link; "
        "unset = PMSGATE_GATEWAY_PUBLIC_URL, and with neither messages carry no link "
        "(`pmsgate doctor` warns).",
    )
    notify_team_email: str | None = Field(
        default=None,
        description="The platform team's address for incident notices (a facility in error, "
        "its recovery); unset = the team gets no e-mail (the customer still does).",
    )
    notify_webhook_url: SecretStr | None = Field(
        default=None,
        description='A URL the team\'s incident notices are POSTed to as JSON {"text": …} '
        "(a Slack-compatible incoming webhook, or any chat that takes that shape); a secret, "
        "since such URLs usually are; unset = no webhook.",
    )
    invitation_ttl_s: float = Field(
        default=7 * 86400.0,
        gt=0,
        le=30 * 86400,
        description="How long the invitation's one-time set-password link works, in seconds "
        "(it works once; a week by default, at most 30 days; an admin can send a new one).",
    )
    password_reset_max_per_hour: AtLeastOne = Field(
        default=5,
        description="'Forgot password?' requests answered per hour for one e-mail address and "
        "for one client address; more get the same page, and no e-mail.",
    )
    login_link_ttl_s: float = Field(
        default=86400.0,
        gt=0,
        le=7 * 86400,
        description="How long the one-time sign-in link of an incident notice works, in "
        "seconds (it works once; at most a week).",
    )
    # --- signed event webhooks (docs/webhooks.md) ---
    webhook_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=60,
        description="How long one webhook delivery waits for the receiver's answer, in "
        "seconds (a timeout is a failed attempt, retried later).",
    )
    webhook_max_attempts: int = Field(
        default=8,
        ge=1,
        le=20,
        description="Attempts of one webhook delivery before it is given up (failed); the "
        "waits between them double twice each time from PMSGATE_WEBHOOK_RETRY_BASE_S.",
    )
    webhook_retry_base_s: PositiveFloat = Field(
        default=30.0,
        description="The wait before a webhook delivery's second attempt, in seconds; each "
        "later wait is four times the one before, at most PMSGATE_WEBHOOK_RETRY_MAX_S.",
    )
    webhook_retry_max_s: PositiveFloat = Field(
        default=21600.0,
        description="The longest wait between two attempts of a webhook delivery, in seconds.",
    )
    webhook_rotation_overlap_s: float = Field(
        default=86400.0,
        ge=0,
        le=30 * 86400,
        description="After a webhook secret is rotated, how long the previous secret still "
        "signs every delivery next to the new one, in seconds (at most 30 days).",
    )
    webhook_retention_days: AtLeastOne = Field(
        default=30,
        description="Webhook events and their settled deliveries are kept this many days "
        "after the event, then purged (the purge-webhook-deliveries job).",
    )
    webhook_allow_loopback_http: bool = Field(
        default=False,
        description="Accept http:// webhook URLs to a loopback host (127.0.0.1, ::1, "
        "localhost): for development and the sandbox only; otherwise https:// is required.",
    )
    # --- web application and console (docs/web.md) ---
    session_secret: SecretStr | None = Field(
        default=None,
        description="Signs the console's session cookies; unset = derived (HKDF) from the "
        "primary vault key of PMSGATE_SECRET_KEYS, so every replica agrees.",
    )
    session_ttl_s: PositiveFloat = Field(
        default=43200.0,
        description="A console sign-in lasts this many seconds (then the user signs in again).",
    )
    cookie_secure: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="The session cookie's Secure flag: `auto` sets it when the request came over "
        "HTTPS (behind a proxy, run uvicorn with --proxy-headers), `always`, or `never`.",
    )
    login_max_failures: AtLeastOne = Field(
        default=5,
        description="Failed sign-ins allowed for one e-mail address from one client address "
        "within login_failure_window_s; further attempts of that pair answer 429 until the "
        "window passes (other accounts from the same address still sign in).",
    )
    login_address_max_failures: AtLeastOne = Field(
        default=50,
        description="Failed sign-ins allowed from one client address, whatever the accounts, "
        "within login_failure_window_s: the ceiling against guessing many accounts from one "
        "address, high enough that a shared office address is not shut by its people's typos.",
    )
    login_account_max_failures: AtLeastOne = Field(
        default=20,
        description="Failed sign-ins allowed for one e-mail address from every client address "
        "together within login_failure_window_s: the ceiling against guessing one account from "
        "many addresses (an admin unlocks it with `pmsgate users unlock`).",
    )
    login_failure_window_s: PositiveFloat = Field(
        default=900.0,
        description="The window, in seconds, over which failed sign-ins are counted.",
    )
    form_token_ttl_s: PositiveFloat = Field(
        default=43200.0,
        description="How long a console form that creates something (a key, a sync, an "
        "invitation) can be sent after its page was shown, in seconds; it is spent by its "
        "first use either way.",
    )
    key_handoff_ttl_s: float = Field(
        default=300.0,
        gt=0,
        le=3600,
        description="How long a freshly minted gateway key waits, encrypted, for the page that "
        "shows it once, in seconds (at most an hour); then it is gone.",
    )
    sync_max_duration_s: PositiveFloat = Field(
        default=800.0,
        description="Maximum duration of POST /api/{assistant}/sync-knowledge (800 s): "
        "the request waits this long for the sync, then answers 202 with the job to poll; the "
        "sync itself is never cut.",
    )
    # --- scheduled jobs (docs/jobs.md) ---
    scheduler_enabled: bool = Field(
        default=True,
        description="Run the scheduled jobs inside `pmsgate serve` (turn off when an external "
        "scheduler runs `pmsgate jobs …` instead).",
    )
    job_intervals_s: dict[str, float] = Field(
        default_factory=dict,
        description="Interval of any scheduled job by name, in seconds, e.g. "
        '{"check-connections": 600}; a job not listed runs at its default in '
        "pmsgate.jobs.registry (docs/jobs.md).",
    )
    # Deprecated: each of these four named one job's interval before PMSGATE_JOB_INTERVALS_S
    # existed. They keep working for one release (folded into job_intervals_s, with a warning
    # logged; docs/jobs.md, "Deprecated settings"); nothing else reads them.
    usage_refresh_interval_s: PositiveFloat | None = _deprecated_interval("refresh-usage")
    listings_sync_interval_s: PositiveFloat | None = _deprecated_interval("restart-listings-syncs")
    pms_check_interval_s: PositiveFloat | None = _deprecated_interval("check-connections")
    usage_flush_interval_s: PositiveFloat | None = _deprecated_interval("flush-gateway-usage")
    # --- the tool-call log (docs/gateway.md, "The tool-call log") ---
    tool_call_log_retention_days: int = Field(
        default=30,
        ge=7,
        le=400,
        description="Logged tool and operation calls are kept this many days, then purged "
        "(at least 7: the health panel counts a week).",
    )
    tool_call_log_max_per_facility: int = Field(
        default=100_000,
        ge=1000,
        description="At most this many logged calls are kept per facility (the oldest go first).",
    )
    # --- the audit trail (docs/audit.md) ---
    audit_retention_days: AtLeastOne = Field(
        default=400,
        description="Audit events are kept this many days, then purged (docs/audit.md).",
    )
    log_level: str = Field(default="INFO", description="Log level of the structured logs.")
    log_json: bool = Field(default=False, description="Write logs as JSON lines.")

    @model_validator(mode="after")
    def _warn_renamed(self) -> Settings:
        """A renamed setting read under its old name says which name to use."""
        for old, new in RENAMED_SETTINGS.items():
            if old in os.environ and new not in os.environ:
                log.warning(
                    "%s is deprecated and goes in the next release: set %s instead", old, new
                )
        return self

    @model_validator(mode="after")
    def _fold_deprecated_intervals(self) -> Settings:
        """Each deprecated interval setting still sets its job, unless the map names it."""
        for setting, job in DEPRECATED_JOB_INTERVALS.items():
            value = getattr(self, setting)
            if value is None:
                continue
            variable = f"PMSGATE_{setting.upper()}"
            log.warning(
                "%s is deprecated and goes in the next release: set "
                "PMSGATE_JOB_INTERVALS_S='{\"%s\": %s}' instead",
                variable,
                job,
                f"{value:g}",
            )
            self.job_intervals_s = {job: value, **self.job_intervals_s}
        return self

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _origins(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            origins = [str(o).strip().rstrip("/").lower() for o in value]
            for origin in origins:
                scheme, _, rest = origin.partition("://")
                if scheme not in {"http", "https"} or not rest or "/" in rest:
                    raise ValueError(f"{origin!r} is not an origin: write scheme://host[:port]")
            return origins
        return value

    @field_validator("public_url", "otel_endpoint")
    @classmethod
    def _http_base_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or not value.strip():
            return None  # unset, or set to "": unset
        value = value.strip().rstrip("/")
        if not value.startswith(("https://", "http://")):
            raise ValueError(_BASE_URL_EXAMPLES[str(info.field_name)])
        return value

    @property
    def console_url(self) -> str | None:
        """The base URL links in messages start with (public_url, else the gateway's)."""
        base = self.public_url or self.gateway_public_url
        return base.strip().rstrip("/") if base and base.strip() else None

    @field_validator("kross_base_url", "assistant_api_url")
    @classmethod
    def _strip_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("oauth_external_issuer", "oauth_external_jwks_url")
    @classmethod
    def _external_server_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not value.strip().startswith(("https://", "http://")):
            raise ValueError("write the URL, e.g. https://login.example.com")
        return value.strip()

    @model_validator(mode="after")
    def _external_server_whole(self) -> Settings:
        # An issuer without its keys (or keys without an issuer) would accept nothing.
        if (self.oauth_external_issuer is None) != (self.oauth_external_jwks_url is None):
            raise ValueError(
                "set PMSGATE_OAUTH_EXTERNAL_ISSUER and PMSGATE_OAUTH_EXTERNAL_JWKS_URL together"
            )
        return self

    @field_validator("metrics_address")
    @classmethod
    def _host_and_port(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        host, _ = split_host_port(value)  # refused at start-up, not when the listener binds
        # metrics_token is declared first, so it is in info.data (None: unset) unless it was
        # refused itself, which is then the one problem reported. Beyond loopback the
        # address alone protects nothing that a NetworkPolicy or a firewall may not lose:
        # the token is required (docs/operations.md, /metrics).
        token_unset = "metrics_token" in info.data and info.data["metrics_token"] is None
        if token_unset and not is_loopback_host(host):
            raise ValueError(
                f"{value} is reachable from other machines (every pod of a cluster, for "
                "0.0.0.0), and the metrics name every facility: set PMSGATE_METRICS_TOKEN "
                "too (Prometheus sends it as a bearer token), or bind a loopback address "
                "such as 127.0.0.1:9464"
            )
        return value

    @field_validator("metrics_token")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        # A short token is guessable; an empty one (a variable set to "") was surely a mistake.
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError(
                "use at least 16 characters, e.g. the output of "
                "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
            )
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("use one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return value

    @property
    def metrics_listen(self) -> tuple[str, int] | None:
        """``metrics_address`` as (host, port), or None: /metrics on the main address."""
        return None if self.metrics_address is None else split_host_port(self.metrics_address)

    @property
    def effective_database_url(self) -> str:
        """The database URL to use, defaulting to a SQLite file in the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'pmsgate.db').resolve()}"

    @property
    def oauth_registration_open(self) -> bool:
        """Whether apps may register themselves: the setting, else whether the database is
        the embedded SQLite (development, demo, sandbox) rather than a server (production)."""
        if self.oauth_client_registration is not None:
            return self.oauth_client_registration
        return self.effective_database_url.startswith("sqlite")

    @property
    def migrates_on_start(self) -> bool:
        """Whether `serve` and `demo` migrate at start: the setting, else whether the database
        is SQLite — one machine's file, no replicas on other machines, no migration Job: the
        embedded mode stays one command (`make demo`, a plain `pmsgate serve`)."""
        if self.migrate_on_start is not None:
            return self.migrate_on_start
        return self.effective_database_url.startswith("sqlite")


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # another host name: it may resolve to any interface
        return False


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9464`` for IPv6, port 0 for any free one) as (host, port)."""
    host, separator, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not separator or not host or not port.isdigit() or not int(port) < 65536:
        raise ValueError(f"expected host:port (e.g. 127.0.0.1:9464), got {address!r}")
    return host, int(port)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings()
