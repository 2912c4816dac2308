"""Tables. Secrets are stored only as vault ciphertext (``*_enc``) or hashes."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Literal, NewType, get_args

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from pmsgate.storage.db import Base

# A secret as the vault sealed it (`Vault.encrypt`'s answer, never a plain value): the only
# type the repositories accept for a column holding a secret, so mypy refuses a plaintext.
Ciphertext = NewType("Ciphertext", str)


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC, on SQLite as on PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime stored; use timezone-aware UTC")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Facility(Base):
    """One booking-system property the gateway calls on behalf of a customer."""

    __tablename__ = "facilities"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    hotel_id: Mapped[str] = mapped_column(String(32), unique=True)
    username: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))  # partner | own
    password_enc: Mapped[str] = mapped_column(Text)
    api_key_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    integration_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(16), default="connected")
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_auth_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # When ``status`` last changed: an incident (a move to error) is named by it.
    status_changed_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    limit_per_minute: Mapped[int] = mapped_column(Integer, default=10)
    limit_per_hour: Mapped[int] = mapped_column(Integer, default=300)
    limit_per_day: Mapped[int] = mapped_column(Integer, default=5000)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)

    keys: Mapped[list[GatewayKey]] = relationship(
        back_populates="facility", cascade="all, delete-orphan"
    )


class GatewayKey(Base):
    """A caller's key for one facility; only its SHA-256 is kept."""

    __tablename__ = "gateway_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    facility_id: Mapped[int] = mapped_column(ForeignKey("facilities.id", ondelete="CASCADE"))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # What the key may do (see gateway/scopes.py); a key minted before scopes existed
    # holds only "tools:read" until an admin grants it more.
    scopes: Mapped[list[str]] = mapped_column(JSON, default=lambda: ["tools:read"])
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # Written in batches (not on every call), so it may lag by the batch interval.
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)

    facility: Mapped[Facility] = relationship(back_populates="keys")


class FacilityToken(Base):
    """The facility's current booking-system token, encrypted; shared by replicas."""

    __tablename__ = "facility_tokens"

    facility_id: Mapped[int] = mapped_column(
        ForeignKey("facilities.id", ondelete="CASCADE"), primary_key=True
    )
    token_enc: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    obtained_at: Mapped[datetime] = mapped_column(UtcDateTime)


class IdempotencyRecord(Base):
    """One write as the caller named it: its body hash, its state and the stored answer."""

    __tablename__ = "idempotency_records"
    __table_args__ = (
        UniqueConstraint("facility_id", "key"),
        # Finds an earlier unresolved write of the same body under another key.
        Index("ix_idempotency_records_unresolved", "facility_id", "operation", "body_hash"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    facility_id: Mapped[int] = mapped_column(ForeignKey("facilities.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(200))
    operation: Mapped[str] = mapped_column(String(100))
    body_hash: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))  # in_flight | done | unknown | failed
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The process (gateway instance id) running the write while it is in flight.
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # What a read of the reservation showed just before sending, for writes whose
    # read-back compares before and after (docs/gateway.md "Writes").
    read_before: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


# ======================================================================================
# Platform-side records (docs/requirements.md R14): customers, their workspace configuration, PMS
# integration rows, the apartment registry, usage snapshots and the knowledge allowlist.
# Every value set a column may hold is declared once here as a Literal; the CHECK
# constraints and the repositories' validation are both derived from it.
# ======================================================================================

CustomerKind = Literal["partner", "own"]
# Stripe's subscription statuses: the contract's subscription is checked before onboarding.
SubscriptionStatus = Literal[
    "active",
    "trialing",
    "past_due",
    "unpaid",
    "canceled",
    "incomplete",
    "incomplete_expired",
    "paused",
]
BillingMode = Literal["partner_markup"]
IntegrationProvider = Literal["notes", "kross"]
IntegrationStatus = Literal["connected", "error"]
UsageSnapshotKind = Literal["baseline", "periodic"]


def _one_of(column: str, values: tuple[str, ...]) -> str:
    """SQL condition of a CHECK constraint limiting a column to a Literal's values."""
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


class Customer(Base):
    """A property operator (a "student") onboarded onto the assistant."""

    __tablename__ = "customers"
    __table_args__ = (
        CheckConstraint(_one_of("kind", get_args(CustomerKind)), name="kind"),
        CheckConstraint(
            "subscription_status IS NULL OR "
            + _one_of("subscription_status", get_args(SubscriptionStatus)),
            name="subscription_status",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student_id: Mapped[str] = mapped_column(String(64), unique=True)
    email: Mapped[str] = mapped_column(String(320))
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    contract_ref: Mapped[str | None] = mapped_column(String(100), nullable=True)
    contract_price_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    subscription_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    subscription_status: Mapped[str | None] = mapped_column(String(32), nullable=True)
    subscription_price_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    handles_upsell: Mapped[bool] = mapped_column(Boolean, default=False)
    handles_late_check_in: Mapped[bool] = mapped_column(Boolean, default=False)
    # The language the customer reads (the customer file's): incident notices are in it.
    language: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # The IANA time zone the customer reads times in (e.g. Europe/Rome); None: Europe/Rome.
    timezone: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class WorkspaceConfiguration(Base):
    """A customer's assistant workspace and billing, one each (docs/requirements.md R14.2)."""

    __tablename__ = "workspace_configurations"
    __table_args__ = (
        CheckConstraint(_one_of("billing_mode", get_args(BillingMode)), name="billing_mode"),
        CheckConstraint("plan_limit_usd >= 0", name="plan_limit_usd"),
        CheckConstraint(
            "alert_threshold_pct >= 1 AND alert_threshold_pct <= 100", name="alert_threshold_pct"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student_id: Mapped[str] = mapped_column(ForeignKey("customers.student_id"), unique=True)
    # Unknown until the workspace exists on the platform (step 5 runs after step 3).
    workspace_id: Mapped[str | None] = mapped_column(String(100), nullable=True, unique=True)
    workspace_name: Mapped[str] = mapped_column(String(200))
    workspace_slug: Mapped[str] = mapped_column(String(100), unique=True)
    plan_limit_usd: Mapped[Decimal] = mapped_column(Numeric(12, 2))
    alert_threshold_pct: Mapped[int] = mapped_column(Integer)
    billing_mode: Mapped[str] = mapped_column(String(32))
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class CustomerIntegration(Base):
    """A customer's connection to the notes workspace or the booking system.

    Its id is its own (``int-…``), never the student_id: custom tools and the gateway
    facility (``facilities.integration_id``) refer to the booking-system row by it.
    """

    __tablename__ = "pms_integrations"
    __table_args__ = (
        UniqueConstraint("student_id", "provider", name="uq_pms_integrations_student_provider"),
        CheckConstraint(_one_of("provider", get_args(IntegrationProvider)), name="provider"),
        CheckConstraint(_one_of("status", get_args(IntegrationStatus)), name="status"),
        CheckConstraint("id <> student_id", name="id_is_not_student_id"),
        # Each provider's own fields stay on its own rows, so a row never mixes the two.
        CheckConstraint("provider = 'kross' OR facility_id IS NULL", name="facility_on_kross"),
        CheckConstraint(
            "provider = 'notes' OR (notes_workspace_id IS NULL "
            "AND apartments_database_id IS NULL AND token_enc IS NULL)",
            name="notes_fields_on_notes",
        ),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    student_id: Mapped[str] = mapped_column(ForeignKey("customers.student_id"))
    provider: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    status_changed_at: Mapped[datetime] = mapped_column(UtcDateTime)
    facility_id: Mapped[int | None] = mapped_column(
        ForeignKey("facilities.id", ondelete="SET NULL"), nullable=True, unique=True
    )
    notes_workspace_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    apartments_database_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    token_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Set when the listings sync must run again (after a reconnect); cleared once it ran.
    listings_sync_due_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Apartment(Base):
    """One apartment of the registry: its booking-system room type, listing and notes page.

    The booking-system room type is the apartment's identity (listings mirror the booking
    system's apartments, docs/requirements.md R21.10); listing and notes page are attached to it
    later, by the listings sync and by onboarding, in either order.
    """

    __tablename__ = "apartments"
    __table_args__ = (
        # Real UNIQUE constraints (NULLs never collide): targets for ON CONFLICT and the
        # guard that one listing or one notes page maps to one apartment only.
        UniqueConstraint("student_id", "pms_room_type_id", name="uq_apartments_student_room_type"),
        UniqueConstraint(
            "student_id", "assistant_listing_id", name="uq_apartments_student_listing"
        ),
        UniqueConstraint("student_id", "notes_page_id", name="uq_apartments_student_notes_page"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student_id: Mapped[str] = mapped_column(ForeignKey("customers.student_id"))
    pms_room_type_id: Mapped[str] = mapped_column(String(64))
    assistant_listing_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    notes_page_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class UsageSnapshot(Base):
    """A workspace's cumulative consumption at one moment (docs/requirements.md R19.1)."""

    __tablename__ = "usage_snapshots"
    __table_args__ = (
        UniqueConstraint(
            "student_id", "kind", "taken_at", name="uq_usage_snapshots_student_kind_taken_at"
        ),
        # One baseline per customer: re-running onboarding step 16 can never add a second.
        Index(
            "uq_usage_snapshots_one_baseline",
            "student_id",
            unique=True,
            sqlite_where=text("kind = 'baseline'"),
            postgresql_where=text("kind = 'baseline'"),
        ),
        Index("ix_usage_snapshots_student_taken_at", "student_id", "taken_at"),
        CheckConstraint(_one_of("kind", get_args(UsageSnapshotKind)), name="kind"),
        CheckConstraint(
            "usd_spent >= 0 AND messages >= 0 AND tool_calls >= 0 AND upstream_calls >= 0",
            name="non_negative",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student_id: Mapped[str] = mapped_column(ForeignKey("customers.student_id"))
    workspace_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    kind: Mapped[str] = mapped_column(String(16))
    taken_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # The platform's figures: NULL when unknown (a platform without a usage API: the
    # reason is in ``details``), never an invented zero.
    usd_spent: Mapped[Decimal | None] = mapped_column(Numeric(14, 4), nullable=True)
    messages: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tool_calls: Mapped[int | None] = mapped_column(Integer, nullable=True)
    upstream_calls: Mapped[int] = mapped_column(Integer)  # the gateway's own count
    # What else the platform reported, kept as-is: its usage shape is not public.
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class AllowlistEntry(Base):
    """An e-mail admitted to the knowledge bridge's beta, with why (docs/requirements.md R14.6)."""

    __tablename__ = "knowledge_allowlist"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Stored lower-cased, so the unique constraint is case-insensitive on every backend.
    email: Mapped[str] = mapped_column(String(320), unique=True)
    added_on: Mapped[date] = mapped_column(Date)
    contract: Mapped[str] = mapped_column(String(100), default="")
    workspace: Mapped[str] = mapped_column(String(200), default="")
    apartments: Mapped[int | None] = mapped_column(Integer, nullable=True)
    subscription: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


# ======================================================================================
# Knowledge sync (docs/knowledge-sync.md): what the last sync saw of each apartment's notes
# page, and the sync jobs the web app and the CLI start. The platform's nodes (found by the
# source key in their metadata) are the ground truth; these rows only let a sync skip work.
# ======================================================================================

SyncJobKind = Literal["dry_run", "commit"]
SyncJobStatus = Literal["queued", "running", "succeeded", "failed"]
ACTIVE_SYNC_JOB_STATUSES: tuple[str, ...] = ("queued", "running")


class KnowledgePageState(Base):
    """One apartment page as the last sync read it: its edit time, its check, its node hashes.

    Never holds page content (a WiFi password is a secret): only hashes and section ids.
    """

    __tablename__ = "knowledge_page_states"
    __table_args__ = (
        UniqueConstraint("student_id", "notes_page_id", name="uq_knowledge_page_states_page"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student_id: Mapped[str] = mapped_column(ForeignKey("customers.student_id"))
    notes_page_id: Mapped[str] = mapped_column(String(100))
    # The page's last_edited_time (the API rounds it to the minute) and when its tree read began.
    page_edited_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    read_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # Bumped when the page-to-nodes rules change, so every page is read again once.
    format_version: Mapped[int] = mapped_column(Integer)
    template_complete: Mapped[bool] = mapped_column(Boolean)
    missing_sections: Mapped[list[str]] = mapped_column(JSON)
    wifi_found: Mapped[bool] = mapped_column(Boolean)
    wifi_source_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # source key -> content hash of every node the page yields (as of read_at).
    node_hashes: Mapped[dict[str, str]] = mapped_column(JSON)
    # Set only when every node above was written to the platform under this listing.
    synced_listing_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    synced_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class KnowledgeSyncJob(Base):
    """One dry run or commit of a customer's knowledge sync, with its progress and counters."""

    __tablename__ = "knowledge_sync_jobs"
    __table_args__ = (
        CheckConstraint(_one_of("kind", get_args(SyncJobKind)), name="kind"),
        CheckConstraint(_one_of("status", get_args(SyncJobStatus)), name="status"),
        CheckConstraint("progress_done >= 0 AND progress_total >= 0", name="progress_non_negative"),
        # One active sync per customer, across replicas: two commits racing would both
        # create the nodes neither has seen yet.
        Index(
            "uq_knowledge_sync_jobs_one_active",
            "student_id",
            unique=True,
            sqlite_where=text("status IN ('queued', 'running')"),
            postgresql_where=text("status IN ('queued', 'running')"),
        ),
        Index("ix_knowledge_sync_jobs_student_created_at", "student_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    student_id: Mapped[str] = mapped_column(ForeignKey("customers.student_id"))
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    # The counters (docs/requirements.md R17.1) and the per-apartment details, once known.
    counters: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Which process runs it; its heartbeat tells a live job from one a restart interrupted.
    runner_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


# ======================================================================================
# Onboarding (docs/requirements.md R20): the runs of the runbook and each step's results with
# their evidence. The latest result per (student_id, step) of a real (not dry) run, or
# recorded by a person with `confirm`, is the customer's checklist. No foreign key to
# customers: a run starts (and may stop at step 1) before the customer row exists.
# ======================================================================================

OnboardingRunStatus = Literal["running", "succeeded", "failed", "stopped"]
OnboardingStepStatus = Literal["done", "not_done", "waiting", "would_do", "failed", "stopped"]
OnboardingStepKind = Literal["auto", "check", "manual"]
OnboardingRecorder = Literal["system", "person"]


class OnboardingRun(Base):
    """One run of `pmsgate onboard` for one customer."""

    __tablename__ = "onboarding_runs"
    __table_args__ = (
        CheckConstraint(_one_of("status", get_args(OnboardingRunStatus)), name="status"),
        CheckConstraint("route IS NULL OR route IN ('A', 'B')", name="route"),
        # Runs of one customer are numbered 1, 2, …: their order, whatever the clock says.
        UniqueConstraint("student_id", "number", name="uq_onboarding_runs_student_number"),
        Index("ix_onboarding_runs_student_started_at", "student_id", "started_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    student_id: Mapped[str] = mapped_column(String(64))
    number: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    route: Mapped[str | None] = mapped_column(String(1), nullable=True)
    dry_run: Mapped[bool] = mapped_column(Boolean)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # Where and why a failed or stopped run ended (never a secret).
    ended_at_step: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)


class OnboardingStepResult(Base):
    """One step's outcome: done or not, with JSON evidence; recorded by a run or a person."""

    __tablename__ = "onboarding_step_results"
    __table_args__ = (
        CheckConstraint(_one_of("status", get_args(OnboardingStepStatus)), name="status"),
        CheckConstraint(_one_of("kind", get_args(OnboardingStepKind)), name="kind"),
        CheckConstraint(_one_of("recorded_by", get_args(OnboardingRecorder)), name="recorded_by"),
        CheckConstraint("number >= 1 AND number <= 17", name="number"),
        Index("ix_onboarding_step_results_student_step", "student_id", "step_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str | None] = mapped_column(
        ForeignKey("onboarding_runs.id", ondelete="CASCADE"), nullable=True
    )
    student_id: Mapped[str] = mapped_column(String(64))
    step_id: Mapped[str] = mapped_column(String(64))
    number: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    done: Mapped[bool] = mapped_column(Boolean)
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON)
    message: Mapped[str] = mapped_column(Text, default="")
    fix: Mapped[str | None] = mapped_column(Text, nullable=True)
    waiting_for: Mapped[str | None] = mapped_column(Text, nullable=True)
    due: Mapped[date | None] = mapped_column(Date, nullable=True)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime)
    recorded_by: Mapped[str] = mapped_column(String(16))
    # Who confirmed a manual step (a person's name or login); None for the system.
    person: Mapped[str | None] = mapped_column(String(200), nullable=True)


# --- the web application and scheduled jobs (docs/web.md, docs/jobs.md) ------------------------

UserRole = Literal["customer", "admin"]
JobRunStatus = Literal["running", "succeeded", "failed"]


class User(Base):
    """A login of the web console: a customer's (bound to its student_id) or a platform admin's."""

    __tablename__ = "users"
    __table_args__ = (
        CheckConstraint(_one_of("role", get_args(UserRole)), name="role"),
        # A customer login always belongs to one customer; an admin to none.
        CheckConstraint(
            "(role = 'customer' AND student_id IS NOT NULL) "
            "OR (role = 'admin' AND student_id IS NULL)",
            name="role_student",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)
    password_hash: Mapped[str] = mapped_column(Text)  # argon2id, never the password
    role: Mapped[str] = mapped_column(String(16))
    student_id: Mapped[str | None] = mapped_column(
        ForeignKey("customers.student_id"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_login_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # When the account's invitation (a one-time set-password link) was last sent.
    invited_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class WebSession(Base):
    """A signed-in browser: the cookie carries the id, the table only its SHA-256."""

    __tablename__ = "web_sessions"
    __table_args__ = (Index("ix_web_sessions_user_id", "user_id"),)

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime)


class GatewayUsageHour(Base):
    """Tool calls and upstream requests of one facility in one clock hour (UTC).

    Each replica counts in memory and adds its counts here every minute, so the
    console's chart of tool calls vs upstream calls survives restarts and sums replicas.
    """

    __tablename__ = "gateway_usage_hours"
    __table_args__ = (
        CheckConstraint("tool_calls >= 0 AND upstream_calls >= 0", name="non_negative"),
    )

    hotel_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    hour: Mapped[datetime] = mapped_column(UtcDateTime, primary_key=True)
    tool_calls: Mapped[int] = mapped_column(Integer, default=0)
    upstream_calls: Mapped[int] = mapped_column(Integer, default=0)


class JobRun(Base):
    """One tick of a scheduled job: what ran when, and how it ended (failures are retried)."""

    __tablename__ = "job_runs"
    __table_args__ = (
        CheckConstraint(_one_of("status", get_args(JobRunStatus)), name="status"),
        Index("ix_job_runs_job_started_at", "job", "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # What the tick did or why it failed (never a secret), as JSON.
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


AuditOutcome = Literal["success", "failure", "refused", "unknown"]
AuditActorKind = Literal["admin", "customer_user", "gateway_key", "cli", "job", "system"]


class AuditEvent(Base):
    """One security-relevant event; rows are only ever appended (and purged after retention).

    No foreign keys: an event outlives the facility, customer or user it names.
    ``details`` holds non-secret context (operation, idempotency key, cause, ...).
    """

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_occurred_at", "occurred_at"),
        Index("ix_audit_events_customer", "customer_id", "occurred_at"),
        Index("ix_audit_events_facility", "facility_id", "occurred_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    occurred_at: Mapped[datetime] = mapped_column(UtcDateTime)
    actor_kind: Mapped[str] = mapped_column(String(16))
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(String(200))
    outcome: Mapped[str] = mapped_column(String(16))
    customer_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    facility_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    client_address: Mapped[str | None] = mapped_column(String(64), nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


RegistryCheckStatus = Literal["ok", "problems", "unchecked", "not_applicable"]


class RegistryCheck(Base):
    """The latest registry check of one customer (docs/requirements.md R18.5).

    One row per customer, replaced by each check (the scheduled ``check-registry`` job,
    the console, ``pmsgate customers check-registry``): the console and the admin's
    "needs attention" view read it without asking the platform. ``report`` is the
    check's JSON (every apartment's mapping, each problem with its reason and fix).
    """

    __tablename__ = "registry_checks"
    __table_args__ = (
        CheckConstraint(_one_of("status", get_args(RegistryCheckStatus)), name="status"),
        Index("ix_registry_checks_status", "status"),
    )

    student_id: Mapped[str] = mapped_column(
        ForeignKey("customers.student_id", ondelete="CASCADE"), primary_key=True
    )
    checked_at: Mapped[datetime] = mapped_column(UtcDateTime)
    status: Mapped[str] = mapped_column(String(16))
    problems: Mapped[int] = mapped_column(Integer, default=0)
    report: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


# --- incident notices and one-time sign-in links (docs/operations.md) ---------------------------

NoticeKind = Literal["error", "recovered"]
NoticeChannel = Literal["customer", "team", "webhook"]
NoticeStatus = Literal["pending", "sent", "failed", "skipped"]


class IncidentNotice(Base):
    """One notice of one facility incident to one channel (docs/operations.md, Notifications).

    An incident is named by the facility's ``status_changed_at`` when it went to ``error``;
    the unique key (facility, incident, kind, channel) lets every replica plan the same
    notices while only one row — and so one message — exists. ``claimed_until`` is the
    lease of the replica sending it; ``last_error`` holds only an error's code, never
    its text.
    """

    __tablename__ = "incident_notices"
    __table_args__ = (
        CheckConstraint(_one_of("kind", get_args(NoticeKind)), name="kind"),
        CheckConstraint(_one_of("channel", get_args(NoticeChannel)), name="channel"),
        CheckConstraint(_one_of("status", get_args(NoticeStatus)), name="status"),
        UniqueConstraint("facility_id", "incident_at", "kind", "channel"),
        Index("ix_incident_notices_status", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    facility_id: Mapped[int] = mapped_column(ForeignKey("facilities.id", ondelete="CASCADE"))
    incident_at: Mapped[datetime] = mapped_column(UtcDateTime)
    kind: Mapped[str] = mapped_column(String(16))
    channel: Mapped[str] = mapped_column(String(16))
    recipient: Mapped[str] = mapped_column(String(320))
    student_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_until: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class LoginLink(Base):
    """A one-time sign-in link: the SHA-256 of its token (never the token), one account."""

    __tablename__ = "login_links"
    __table_args__ = (Index("ix_login_links_expires_at", "expires_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    target: Mapped[str] = mapped_column(String(300))
    purpose: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


# --- incidents: a problem the platform team triages (docs/operations.md, Incidents) -------------

IncidentKind = Literal["pms_error", "job_failing", "registry", "budget"]
IncidentState = Literal["open", "acknowledged", "snoozed", "resolved"]
IncidentEventKind = Literal[
    "opened",
    "acknowledged",
    "assigned",
    "snoozed",
    "woke",
    "note",
    "check",
    "link_resent",
    "recovered",
]


class Incident(Base):
    """One problem of one subject (a facility, a customer or a job), from open to resolved.

    ``open_key`` is the subject while the incident is not resolved and NULL once it is: the
    unique (kind, open_key) lets every replica's reconciliation try to open the same incident
    while only one row exists, and a recurrence after the resolution opens a new row (NULLs
    never collide). ``incident_at`` names a booking-system incident as ``incident_notices``
    does (the facility's ``status_changed_at``): the notices of this incident are those rows,
    never copied. ``last_attempt_at`` is the latest failed attempt counted in ``failures``.
    """

    __tablename__ = "incidents"
    __table_args__ = (
        CheckConstraint(_one_of("kind", get_args(IncidentKind)), name="kind"),
        CheckConstraint(_one_of("state", get_args(IncidentState)), name="state"),
        UniqueConstraint("kind", "open_key"),
        Index("ix_incidents_state", "state"),
        Index("ix_incidents_facility_id", "facility_id"),
        Index("ix_incidents_student_id", "student_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    subject: Mapped[str] = mapped_column(String(200))
    open_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    facility_id: Mapped[int | None] = mapped_column(
        ForeignKey("facilities.id", ondelete="CASCADE"), nullable=True
    )
    student_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    job: Mapped[str | None] = mapped_column(String(64), nullable=True)
    incident_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    reason: Mapped[str | None] = mapped_column(String(300), nullable=True)
    state: Mapped[str] = mapped_column(String(16))
    first_seen: Mapped[datetime] = mapped_column(UtcDateTime)
    last_seen: Mapped[datetime] = mapped_column(UtcDateTime)
    failures: Mapped[int] = mapped_column(Integer, default=1)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    acknowledged_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    acknowledged_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    snoozed_until: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    assignee_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    resolved_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class IncidentEvent(Base):
    """One line of an incident's timeline: who did what when (notices are read from
    ``incident_notices``, not copied here). ``note`` holds a team member's words only."""

    __tablename__ = "incident_events"
    __table_args__ = (
        CheckConstraint(_one_of("kind", get_args(IncidentEventKind)), name="kind"),
        Index("ix_incident_events_incident_id", "incident_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UtcDateTime)
    kind: Mapped[str] = mapped_column(String(16))
    actor: Mapped[str] = mapped_column(String(200))
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


# --- the tool-call log and upstream health (docs/gateway.md, "The tool-call log") -------------

ToolCallKind = Literal["tool", "operation"]
ToolCallTransport = Literal["http", "mcp"]
ToolCallOutcome = Literal["ok", "stale", "replayed", "error"]
ToolCallSource = Literal["cache", "upstream"]


class ToolCall(Base):
    """One tool or operation call a gateway key made for a facility, as the log keeps it.

    Never the answer and never an argument that could carry personal data: ``arguments``
    holds only the non-personal shape the gateway chose to keep (dates, an apartment id;
    docs/gateway.md). Each replica appends its own rows in batches; ``key_prefix`` is the
    key's display prefix (the label is read from ``gateway_keys`` when shown).
    """

    __tablename__ = "tool_calls"
    __table_args__ = (
        CheckConstraint(_one_of("kind", get_args(ToolCallKind)), name="kind"),
        CheckConstraint(_one_of("transport", get_args(ToolCallTransport)), name="transport"),
        CheckConstraint(_one_of("outcome", get_args(ToolCallOutcome)), name="outcome"),
        Index("ix_tool_calls_facility_id_at", "facility_id", "at"),
        Index("ix_tool_calls_at", "at"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    facility_id: Mapped[int] = mapped_column(ForeignKey("facilities.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UtcDateTime)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(80))
    transport: Mapped[str] = mapped_column(String(8))
    key_prefix: Mapped[str | None] = mapped_column(String(16), nullable=True)
    outcome: Mapped[str] = mapped_column(String(16))
    error_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    age_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_ms: Mapped[float] = mapped_column(Float)
    arguments: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class UpstreamHealth(Base):
    """A facility's latest successful and failed booking-system request (every replica's)."""

    __tablename__ = "upstream_health"

    facility_id: Mapped[int] = mapped_column(
        ForeignKey("facilities.id", ondelete="CASCADE"), primary_key=True
    )
    last_success_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_failure_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_failure_code: Mapped[str | None] = mapped_column(String(64), nullable=True)


class FormTokenUse(Base):
    """A spent one-time form token (its SHA-256) and what its one use left behind.

    The row's insert is the spend: its primary key lets one request win however many
    replicas race. ``result_path`` is the page the action answered with (a repeat goes
    there too); ``handoff`` a one-time result encrypted by the vault (a new key's raw value),
    read once by the same session and then erased.
    """

    __tablename__ = "form_token_uses"
    __table_args__ = (Index("ix_form_token_uses_expires_at", "expires_at"),)

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    purpose: Mapped[str] = mapped_column(String(40))
    session_hash: Mapped[str] = mapped_column(String(64))
    spent_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    result_path: Mapped[str | None] = mapped_column(String(300), nullable=True)
    handoff: Mapped[str | None] = mapped_column(Text, nullable=True)
    handoff_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


# --- signed event webhooks (docs/webhooks.md) ---------------------------------------------------

WebhookEventType = Literal[
    "facility.connection_lost",
    "facility.connection_restored",
    "facility.budget_exhausted",
    "knowledge.sync_finished",
    "knowledge.sync_failed",
    "onboarding.completed",
]
WebhookDeliveryStatus = Literal["pending", "delivered", "failed", "disabled"]


class WebhookSubscription(Base):
    """One receiver of signed events: a customer's (``student_id``) or the team's (NULL).

    ``secret_enc`` is the signing secret as the vault sealed it; during a rotation the
    previous one (``previous_secret_enc``) signs too until ``previous_secret_expires_at``.
    ``disabled_reason`` says why a subscription stopped (``gone``: the receiver answered 410).
    """

    __tablename__ = "webhook_subscriptions"
    __table_args__ = (Index("ix_webhook_subscriptions_student_id", "student_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student_id: Mapped[str | None] = mapped_column(
        ForeignKey("customers.student_id", ondelete="CASCADE"), nullable=True
    )
    url: Mapped[str] = mapped_column(String(2000))
    description: Mapped[str] = mapped_column(String(200), default="")
    events: Mapped[list[str]] = mapped_column(JSON, default=list)
    secret_enc: Mapped[str] = mapped_column(Text)
    previous_secret_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    disabled_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class WebhookEvent(Base):
    """One event of the outbox (``msg_…`` id), written with the change it reports.

    No foreign keys: an event outlives the facility or customer it names. ``payload`` is
    the event's ``data`` (identifiers and states, never a secret nor a guest's data);
    ``fanned_out_at`` is set once a delivery exists for every subscription wanting it.
    """

    __tablename__ = "webhook_events"
    __table_args__ = (
        CheckConstraint(_one_of("type", get_args(WebhookEventType)), name="type"),
        Index("ix_webhook_events_fanned_out_at", "fanned_out_at"),
        Index("ix_webhook_events_occurred_at", "occurred_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    type: Mapped[str] = mapped_column(String(64))
    student_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    facility_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    occurred_at: Mapped[datetime] = mapped_column(UtcDateTime)
    fanned_out_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class WebhookDelivery(Base):
    """One event to one subscription: its attempts, the next one's time, the sender's lease.

    The unique (event, subscription) keeps one delivery per subscription whichever replica
    fans the event out; ``claimed_until`` is the lease of the replica sending it now.
    ``last_error`` holds an error's code only, never a receiver's answer.
    """

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        CheckConstraint(_one_of("status", get_args(WebhookDeliveryStatus)), name="status"),
        UniqueConstraint("event_id", "subscription_id"),
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_subscription_id", "subscription_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_id: Mapped[str] = mapped_column(ForeignKey("webhook_events.id", ondelete="CASCADE"))
    subscription_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_subscriptions.id", ondelete="CASCADE")
    )
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    claimed_until: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(String(200), nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


# --- OAuth 2.1 for /mcp and /v1 (docs/oauth.md) ------------------------------------------------

OAuthTokenKind = Literal["access", "refresh"]


class OAuthClient(Base):
    """An assistant app registered with pmsgate's authorization server (RFC 7591).

    ``metadata_`` is the client's registered metadata (redirect URIs, name, grant types, its
    token endpoint authentication method); a confidential client's secret is kept only as
    its SHA-256 (``secret_hash``), shown once in the registration's answer.
    """

    __tablename__ = "oauth_clients"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    client_id: Mapped[str] = mapped_column(String(64), unique=True)
    secret_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class OAuthGrant(Base):
    """What a console user allowed an app: one facility, some scopes, one resource.

    Every token is issued under a grant; revoking it (``revoked_at``) ends them all at once.
    """

    __tablename__ = "oauth_grants"
    __table_args__ = (
        Index("ix_oauth_grants_facility_id", "facility_id"),
        Index("ix_oauth_grants_user_id", "user_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("oauth_clients.id", ondelete="CASCADE"))
    # The console user who consented (NULL once the account is removed; the e-mail stays).
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    user_email: Mapped[str] = mapped_column(String(254))
    facility_id: Mapped[int] = mapped_column(ForeignKey("facilities.id", ondelete="CASCADE"))
    scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    resource: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # Who or what ended it: an actor ("customer_user:…", "admin:…") or "refresh_reused".
    revoked_by: Mapped[str | None] = mapped_column(String(200), nullable=True)


class OAuthAuthorization(Base):
    """One authorization request, from the app's redirect to the code's exchange.

    Created when the app sends the user to ``/oauth/authorize`` (``request_hash``: the
    SHA-256 of the consent page's reference); the consent adds the grant and the code
    (``code_hash``); the token endpoint spends the code once (``used_at``).
    """

    __tablename__ = "oauth_authorizations"
    __table_args__ = (Index("ix_oauth_authorizations_expires_at", "expires_at"),)

    request_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("oauth_clients.id", ondelete="CASCADE"))
    # redirect_uri, redirect_uri_provided_explicitly, code_challenge, state, scopes, resource
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    code_hash: Mapped[str | None] = mapped_column(String(64), unique=True, nullable=True)
    grant_id: Mapped[int | None] = mapped_column(
        ForeignKey("oauth_grants.id", ondelete="CASCADE"), nullable=True
    )
    code_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    used_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class OAuthToken(Base):
    """An access or refresh token of a grant; only its SHA-256 is kept.

    A refresh token is spent by its one use (``used_at``): presented again, it revokes the
    grant (rotation with reuse detection).
    """

    __tablename__ = "oauth_tokens"
    __table_args__ = (
        CheckConstraint(_one_of("kind", get_args(OAuthTokenKind)), name="kind"),
        Index("ix_oauth_tokens_grant_id", "grant_id"),
        Index("ix_oauth_tokens_expires_at", "expires_at"),
    )

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    grant_id: Mapped[int] = mapped_column(ForeignKey("oauth_grants.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(8))
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
