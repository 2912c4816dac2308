"""Steps 1-5 and 8 (docs/requirements.md R21): prerequisites, allowlist, records, workspace, admin.

Every ``check`` only reads (the database, and the upstreams' read endpoints); every
``apply`` goes through the enrolment operations of :mod:`pmsgate.customers.service`,
which write only what differs.

:func:`ensure_facility` registers the booking-system facility in the gateway and
links it to the customer's kross PMS integration row. Step 3 calls it (the kross row
is one of the platform-side records, docs/requirements.md R14.3); step 6 calls it again before
minting the gateway key it stores as a workspace secret (it is a no-op when done).
"""

from __future__ import annotations

import secrets
from typing import Any

import structlog
from pydantic import SecretStr

from pmsgate.customers.context import KROSS_PROVIDER, NOTION_PROVIDER
from pmsgate.customers.service import (
    Subscription,
    configure_workspace,
    connect_notion,
    default_slug,
    link_kross,
    register_customer,
    upstream_error,
    workspace_not_created,
)
from pmsgate.errors import ConfigurationError, Conflict, NotFound, PmsgateError
from pmsgate.gateway.facilities import FacilityView, NewFacility
from pmsgate.gateway.vault import VaultError
from pmsgate.integrations.assistant.errors import AssistantError
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.errors import AuthenticationFailed, KrossError
from pmsgate.integrations.notion.errors import (
    NotionError,
    NotionForbidden,
    NotionNotFound,
    NotionUnauthorized,
)
from pmsgate.integrations.notion.throttle import NotionThrottle
from pmsgate.onboarding.booking import adopt_verified, facility_token, verifier, verify_credentials
from pmsgate.onboarding.steps import (
    BOTH_ROUTES,
    ONBOARDING_ACTOR,
    OnboardingContext,
    PersonTask,
    Problem,
    Step,
    StepKind,
    StepResult,
)
from pmsgate.storage.allowlist import AllowlistComment
from pmsgate.storage.customers import CustomerProfile, CustomerView
from pmsgate.storage.integrations import IntegrationView, new_integration_id

log = structlog.get_logger(__name__)

ADMIN_ROLE = "Admin"
ALLOWLIST_TAKES_EFFECT = "immediately: the allowlist is read on every check, no deploy needed"


# --- what the file asks for ----------------------------------------------------------------------


def profile_of(ctx: OnboardingContext) -> CustomerProfile:
    """The customer profile the file describes."""
    file = ctx.file
    return CustomerProfile(
        student_id=file.student_id,
        email=file.email,
        name=file.name,
        kind=file.kind,
        contract_ref=file.contract.ref,
        contract_price_id=file.contract.price_id,
        handles_upsell=file.autonomy.handles_upsell,
        handles_late_check_in=file.autonomy.handles_late_check_in,
        # Kept on the record: incident notices, sent long after onboarding, are in it.
        language=getattr(file, "language", None),
        timezone=getattr(file, "timezone", None),
    )


def subscription_of(ctx: OnboardingContext) -> Subscription:
    """The subscription the file reports."""
    sub = ctx.file.subscription
    return Subscription(sub.id, sub.status, sub.price_id)


def workspace_name(ctx: OnboardingContext) -> str:
    """The workspace name the file asks for (the customer's name by default)."""
    return (ctx.file.workspace.name or ctx.file.name).strip()


def workspace_slug(ctx: OnboardingContext) -> str:
    """The workspace slug the file asks for (made from the name by default)."""
    slug = ctx.file.workspace.slug
    return slug.strip() if slug else default_slug(workspace_name(ctx))


def file_credentials(ctx: OnboardingContext) -> Credentials:
    """The booking-system credentials of the file (partner: the gateway's shared api key)."""
    booking = ctx.file.booking_system
    if ctx.file.kind == "own":
        api_key = booking.api_key
    else:
        api_key = ctx.settings.partner_api_key
        if api_key is None or not api_key.get_secret_value().strip():
            raise ConfigurationError(
                "PMSGATE_PARTNER_API_KEY is not set: a partner facility cannot authenticate.",
                code="partner_api_key_missing",
                hint="Set PMSGATE_PARTNER_API_KEY to the gateway's shared booking-system api key.",
            )
    return Credentials(
        hotel_id=booking.hotel_id,
        username=booking.username,
        password=booking.password,
        api_key=api_key or SecretStr(""),
    )


def _same_secret(a: SecretStr | None, b: SecretStr | None) -> bool:
    if a is None or b is None:
        return a is b
    return secrets.compare_digest(a.get_secret_value(), b.get_secret_value())


# --- prerequisites -----------------------------------------------------------------------------


SubCheck = tuple[dict[str, Any], Problem | None]  # (evidence, what is wrong or None)


async def _check_subscription(ctx: OnboardingContext) -> SubCheck:
    sub, contract = ctx.file.subscription, ctx.file.contract
    evidence = {
        "subscription_id": sub.id,
        "status": sub.status,
        "price_id": sub.price_id,
        "contract_ref": contract.ref,
        "contract_price_id": contract.price_id,
    }
    if sub.status != "active":
        return evidence, Problem(
            f"the subscription is {sub.status or 'missing'}, not active",
            f"activate the subscription on price {contract.price_id} (contract {contract.ref}) "
            "and update `subscription` in the customer file",
        )
    if sub.price_id != contract.price_id:
        return evidence, Problem(
            f"the subscription is on price {sub.price_id}, the contract says {contract.price_id}",
            f"move the subscription to price {contract.price_id} (contract {contract.ref}) "
            "and update `subscription.price_id` in the customer file",
        )
    return evidence, None


async def _check_assistant(ctx: OnboardingContext) -> SubCheck:
    evidence: dict[str, Any] = {}
    try:
        assistant = ctx.customers.assistant
        workspaces = await assistant.list_workspaces()
        evidence["workspaces_visible"] = len(workspaces)
        config = await ctx.customers.workspaces.find(ctx.student_id)
        slug = workspace_slug(ctx)
        ours = next(
            (
                w
                for w in workspaces
                if (config is not None and w.id == config.workspace_id) or w.slug == slug
            ),
            None,
        )
        if ours is None:
            evidence["custom_tools"] = "not checked: the workspace does not exist yet (step 5)"
        else:
            tools = await assistant.list_custom_tools(ours.id)
            evidence["workspace_id"] = ours.id
            evidence["custom_tools"] = len(tools)
    except ConfigurationError as error:
        return evidence, Problem(error.message, error.hint)
    except AssistantError as error:
        evidence["error"] = error.code
        return evidence, Problem(
            f"the assistant platform refused the tools access ({error.code})",
            "check PMSGATE_ASSISTANT_API_TOKEN: it must be an account token with access to "
            "workspaces and custom tools",
        )
    return evidence, None


async def _check_notion(ctx: OnboardingContext) -> SubCheck:
    notes = ctx.file.notes
    evidence: dict[str, Any] = {"apartments_database_id": notes.apartments_database_id}
    services = ctx.customers
    http = services.http_factory()
    try:
        client = services.notion_client(
            http,
            notes.token,
            throttle=NotionThrottle(
                ctx.settings.notion_requests_per_second, clock=ctx.clock, sleep=services.sleep
            ),
        )
        pages = await client.query_database(notes.apartments_database_id)
    except NotionUnauthorized:
        evidence["error"] = "notes_unauthorized"
        return evidence, Problem(
            "the notes workspace refused the integration token",
            "copy the integration token again from the customer's notes workspace "
            "(notes.token in the customer file)",
        )
    except (NotionNotFound, NotionForbidden) as error:
        evidence["error"] = error.code
        return evidence, Problem(
            f"the token cannot read the apartments database {notes.apartments_database_id}",
            "check notes.apartments_database_id and share the database with the integration",
        )
    except NotionError as error:
        evidence["error"] = error.code
        return evidence, Problem(
            f"the notes workspace failed ({error.code})",
            "retry later; if it persists, check the notes workspace's status",
        )
    finally:
        await http.aclose()
    live = [page for page in pages if not page.archived]
    evidence["apartment_pages"] = len(live)
    ctx.run.notion_apartment_pages = len(live)
    if not live:
        return evidence, Problem(
            "the apartments database has no pages",
            "add one page per apartment (with its PMS room type id) to the apartments database",
        )
    return evidence, None


async def _check_booking_system(ctx: OnboardingContext) -> SubCheck:
    booking = ctx.file.booking_system
    evidence: dict[str, Any] = {
        "hotel_id": booking.hotel_id,
        "username": booking.username,
        "kind": ctx.file.kind,
    }
    ctx.run.booking_system_authenticated = False
    try:
        credentials = file_credentials(ctx)
        facility = await _find_facility(ctx, booking.hotel_id)
        if (
            facility is not None
            and facility.status == "connected"
            and await _facility_has_file_credentials(ctx, facility)
        ):
            # Registered with these very credentials: the gateway's token proves them.
            token = await facility_token(ctx, booking.hotel_id)
            evidence["verified_with"] = "the gateway's token for the registered facility"
        else:
            token = await verify_credentials(ctx, credentials)
            evidence["verified_with"] = "auth/get-token"
    except PmsgateError as error:  # invalid credentials, no partner key, budget spent
        evidence["error"] = error.code
        return evidence, Problem(error.message, error.hint)
    except AuthenticationFailed as error:
        evidence["error"] = error.code
        return evidence, Problem(
            "the booking system rejected the credentials",
            f"check the API user {booking.username} and its password for hotel_id "
            f"{booking.hotel_id}"
            + (" and the own api key" if ctx.file.kind == "own" else "")
            + " (booking-system panel: Settings, then API), then update the customer file",
        )
    except KrossError as error:
        evidence["error"] = error.code
        return evidence, Problem(
            f"the booking system did not answer the authentication ({error.code})",
            "retry later; if it persists, check the booking system's status",
        )
    ctx.run.booking_system_authenticated = True
    evidence["token_expires_at"] = token.expires_at.isoformat()
    return evidence, None


async def check_prerequisites(ctx: OnboardingContext) -> StepResult:
    """Subscription on the contract's price, platform tools access, notes, booking system."""
    checks = {
        "subscription": _check_subscription,
        "platform": _check_assistant,
        "notes": _check_notion,
        "booking_system": _check_booking_system,
    }
    evidence: dict[str, Any] = {}
    problems: list[Problem] = []
    # Every sub-check runs, so one run reports every missing prerequisite at once.
    for name, check in checks.items():
        found, problem = await check(ctx)
        found["ok"] = problem is None
        evidence[name] = found
        if problem is not None:
            problems.append(problem)
    if problems:
        return StepResult(
            done=False,
            evidence=evidence,
            message="prerequisite not met: " + "; ".join(p.reason for p in problems),
            stop=True,
            fix="; ".join(p.fix for p in problems if p.fix),
        )
    return StepResult(
        done=True,
        evidence=evidence,
        message=(
            f"subscription active on {ctx.file.contract.price_id}, platform reachable, "
            f"{evidence['notes']['apartment_pages']} apartment pages, booking system authenticates"
        ),
    )


# --- allowlist ---------------------------------------------------------------------------------


def _allowlist_comment(ctx: OnboardingContext, existing_date: Any = None) -> AllowlistComment:
    sub = ctx.file.subscription
    apartments = ctx.run.notion_apartment_pages
    return AllowlistComment(
        added_on=existing_date or ctx.file.contract.signed_on or ctx.clock.now().date(),
        contract=ctx.file.contract.ref,
        workspace=workspace_slug(ctx),
        apartments=apartments,
        subscription=" ".join(part for part in (sub.id, sub.status) if part),
    )


async def check_allowlist(ctx: OnboardingContext) -> StepResult:
    """The customer's e-mail is on the knowledge allowlist with the runbook's comment."""
    entry = await ctx.customers.allowlist.find(ctx.file.email)
    if entry is None:
        return StepResult(done=False, message=f"{ctx.file.email} is not on the allowlist")
    wanted = _allowlist_comment(ctx, entry.added_on)
    # The apartments count is informative and moves with the listings: not compared.
    current = (entry.contract, entry.workspace, entry.subscription)
    if current != (wanted.contract, wanted.workspace, wanted.subscription):
        return StepResult(
            done=False,
            evidence={"comment": entry.comment},
            message="the allowlist comment is out of date",
        )
    return StepResult(
        done=True,
        evidence={
            "email": entry.email,
            "comment": entry.comment,
            "takes_effect": ALLOWLIST_TAKES_EFFECT,
        },
        message=f"{entry.email} allowlisted ({entry.comment})",
    )


async def apply_allowlist(ctx: OnboardingContext) -> None:
    """Admit the customer's e-mail (or refresh its comment)."""
    existing = await ctx.customers.allowlist.find(ctx.file.email)
    await ctx.customers.allowlist.put(
        ctx.file.email, _allowlist_comment(ctx, existing.added_on if existing else None)
    )


async def describe_allowlist(ctx: OnboardingContext) -> str:
    """What apply_allowlist would do."""
    comment = _allowlist_comment(ctx)
    return (
        f"put {ctx.file.email} on the knowledge allowlist (contract {comment.contract}, "
        f"workspace {comment.workspace}); effective at once, no deploy"
    )


# --- the booking-system facility ---------------------------------------------------------------


async def _find_facility(ctx: OnboardingContext, hotel_id: str) -> FacilityView | None:
    try:
        return await ctx.facilities.get(hotel_id)
    except NotFound as error:
        if error.code == "facility_not_found":
            return None
        raise


async def _facility_problem(ctx: OnboardingContext) -> tuple[str | None, dict[str, Any]]:
    """Why the facility is not registered, linked and on the file's credentials (None: it is)."""
    booking = ctx.file.booking_system
    evidence: dict[str, Any] = {"hotel_id": booking.hotel_id}
    row = await ctx.customers.integrations.for_student(ctx.student_id, KROSS_PROVIDER)
    facility = await _find_facility(ctx, booking.hotel_id)
    if row is not None:
        evidence["pms_integration_id"] = row.id
    if facility is None:
        return f"facility {booking.hotel_id} is not registered in the gateway", evidence
    evidence["facility_status"] = facility.status
    if row is None:
        return "the customer has no booking-system (kross) integration row", evidence
    if row.facility_hotel_id != facility.hotel_id or facility.integration_id != row.id:
        return f"the kross row {row.id} is not linked to facility {booking.hotel_id}", evidence
    if facility.kind != ctx.file.kind:
        return (
            f"facility {booking.hotel_id} is `{facility.kind}`, the file says `{ctx.file.kind}`",
            (evidence),
        )
    if not await _facility_has_file_credentials(ctx, facility):
        return f"facility {booking.hotel_id} holds other credentials than the file", evidence
    if facility.status != "connected" or row.status != "connected":
        return f"facility {booking.hotel_id} is in error: {facility.last_error}", evidence
    return None, evidence


async def _facility_has_file_credentials(ctx: OnboardingContext, facility: FacilityView) -> bool:
    booking = ctx.file.booking_system
    try:
        stored = await ctx.facilities.credentials(facility.hotel_id)
    except VaultError:
        return False
    if stored.username != booking.username.strip():
        return False
    if not _same_secret(stored.password, booking.password):
        return False
    return facility.kind != "own" or _same_secret(stored.api_key, booking.api_key)


async def ensure_facility(ctx: OnboardingContext) -> FacilityView:
    """The booking-system facility registered in the gateway and linked to the kross row.

    Idempotent: registers the facility when absent (with the file's credentials,
    encrypted by the vault), moves it to the file's credentials when they differ
    (verified against the booking system first), and creates or links the
    customer's kross integration row. The row id is the file's
    ``booking_system.integration_id`` when given, else a fresh ``int-…`` id — never
    the student_id. The gateway key minted at registration is revoked at once:
    nobody saw it; step 6 mints the key it stores as a workspace secret.
    Needs the customer row (step 3 registers it first).
    """
    services, booking = ctx.customers, ctx.file.booking_system
    student_id = ctx.student_id
    wanted_row_id = booking.integration_id
    row = await services.integrations.for_student(student_id, KROSS_PROVIDER)
    if row is not None and wanted_row_id and row.id != wanted_row_id:
        raise Conflict(
            f"The kross integration row of {student_id} is {row.id}, the customer file says "
            f"{wanted_row_id}.",
            code="pms_integration_mismatch",
            hint="Correct booking_system.integration_id in the customer file (or remove it).",
        )
    facility = await _find_facility(ctx, booking.hotel_id)
    if facility is not None:
        owner = await services.integrations.find(facility.integration_id)
        if owner is not None and owner.student_id != student_id:
            raise Conflict(
                f"Facility {booking.hotel_id} belongs to another customer ({owner.student_id}).",
                code="facility_of_another_customer",
                hint="Check booking_system.hotel_id in the customer file.",
            )
        if facility.kind != ctx.file.kind:
            raise Conflict(
                f"Facility {booking.hotel_id} is registered as `{facility.kind}`, the customer "
                f"file says `{ctx.file.kind}`.",
                code="facility_kind_mismatch",
                hint="Correct `kind` in the customer file, or re-register the facility.",
            )
        if row is not None and facility.integration_id != row.id:
            raise Conflict(
                f"Facility {booking.hotel_id} is registered for integration row "
                f"{facility.integration_id}, the customer's kross row is {row.id}.",
                code="pms_integration_mismatch",
                hint="Re-register the facility with the customer's kross row id.",
            )
        if facility.status != "connected" or not await _facility_has_file_credentials(
            ctx, facility
        ):
            # New credentials, or an error state: verified upstream, then `connected`.
            facility = await ctx.facilities.reconnect(
                booking.hotel_id,
                username=booking.username,
                password=booking.password,
                api_key=booking.api_key if ctx.file.kind == "own" else None,
                verify=verifier(ctx),
                actor=ONBOARDING_ACTOR,
            )
    else:
        row_id = row.id if row is not None else (wanted_row_id or new_integration_id())
        facility, _raw_key = await ctx.facilities.add(
            NewFacility(
                hotel_id=booking.hotel_id,
                username=booking.username,
                password=booking.password,
                kind=ctx.file.kind,
                api_key=booking.api_key if ctx.file.kind == "own" else None,
                integration_id=row_id,
                name=booking.name or ctx.file.name,
            ),
            actor=ONBOARDING_ACTOR,
        )
        del _raw_key  # never shown, never stored: revoked below
        for key in await ctx.facilities.list_keys(booking.hotel_id):
            if key.revoked_at is None and key.label == "initial":
                await ctx.facilities.revoke_key(booking.hotel_id, key.id, actor=ONBOARDING_ACTOR)
        log.info(
            "onboarding_facility_registered", student_id=student_id, hotel_id=facility.hotel_id
        )
    # The token step 1 obtained for these credentials becomes the facility's (one session).
    await adopt_verified(ctx, booking.hotel_id)
    await link_kross(services, student_id, booking.hotel_id)
    return facility


# --- workspace configuration -------------------------------------------------------------------


def _customer_differs(ctx: OnboardingContext, customer: CustomerView) -> list[str]:
    profile, sub = profile_of(ctx), subscription_of(ctx)
    wanted = {
        "email": profile.email.lower(),
        "name": profile.name,
        "kind": profile.kind,
        "contract_ref": profile.contract_ref,
        "contract_price_id": profile.contract_price_id,
        "handles_upsell": profile.handles_upsell,
        "handles_late_check_in": profile.handles_late_check_in,
        "subscription_id": sub.subscription_id,
        "subscription_status": sub.status,
        "subscription_price_id": sub.price_id,
    }
    stored = {
        "email": customer.email.lower(),
        "name": customer.name,
        "kind": customer.kind,
        "contract_ref": customer.contract_ref,
        "contract_price_id": customer.contract_price_id,
        "handles_upsell": customer.handles_upsell,
        "handles_late_check_in": customer.handles_late_check_in,
        "subscription_id": customer.subscription_id,
        "subscription_status": customer.subscription_status,
        "subscription_price_id": customer.subscription_price_id,
    }
    return [key for key in wanted if wanted[key] != stored[key]]


async def check_workspace_configuration(ctx: OnboardingContext) -> StepResult:
    """Customer row, workspace configuration (``partner_markup``) and kross row as in the file."""
    services = ctx.customers
    customer = await services.customers.find(ctx.student_id)
    if customer is None:
        return StepResult(done=False, message=f"customer {ctx.student_id} is not registered")
    differs = _customer_differs(ctx, customer)
    if differs:
        return StepResult(
            done=False,
            evidence={"customer_fields_differ": differs},
            message="the customer row differs from the file: " + ", ".join(differs),
        )
    config = await services.workspaces.find(ctx.student_id)
    if config is None:
        return StepResult(done=False, message="no workspace configuration")
    workspace = ctx.file.workspace
    wanted = (
        workspace_name(ctx),
        workspace_slug(ctx),
        workspace.plan_limit_usd.quantize(config.plan_limit_usd),
        workspace.alert_threshold_pct,
        "partner_markup",
        workspace.notes.strip(),
    )
    stored = (
        config.workspace_name,
        config.workspace_slug,
        config.plan_limit_usd,
        config.alert_threshold_pct,
        config.billing_mode,
        config.notes,
    )
    if wanted != stored:
        return StepResult(done=False, message="the workspace configuration differs from the file")
    problem, facility_evidence = await _facility_problem(ctx)
    evidence = {
        "customer": customer.student_id,
        "billing_mode": config.billing_mode,
        "workspace_name": config.workspace_name,
        "workspace_slug": config.workspace_slug,
        "plan_limit_usd": str(config.plan_limit_usd),
        "alert_threshold_pct": config.alert_threshold_pct,
        **facility_evidence,
    }
    if problem is not None:
        return StepResult(done=False, evidence=evidence, message=problem)
    return StepResult(
        done=True,
        evidence=evidence,
        message=(
            f"configuration {config.workspace_slug} (partner_markup, "
            f"${config.plan_limit_usd} at {config.alert_threshold_pct}%); facility "
            f"{facility_evidence['hotel_id']} on row {facility_evidence['pms_integration_id']}"
        ),
    )


async def apply_workspace_configuration(ctx: OnboardingContext) -> None:
    """Register the customer, upsert the configuration, register and link the facility."""
    services = ctx.customers
    await register_customer(services, profile_of(ctx), subscription=subscription_of(ctx))
    workspace = ctx.file.workspace
    await services.workspaces.upsert(
        ctx.student_id,
        workspace_name=workspace_name(ctx),
        workspace_slug=workspace_slug(ctx),
        plan_limit_usd=workspace.plan_limit_usd,
        alert_threshold_pct=workspace.alert_threshold_pct,
        billing_mode="partner_markup",
        notes=workspace.notes,
    )
    await ensure_facility(ctx)


async def describe_workspace_configuration(ctx: OnboardingContext) -> str:
    """What apply_workspace_configuration would do."""
    return (
        f"register customer {ctx.student_id}, upsert workspace configuration "
        f"{workspace_slug(ctx)} (billing_mode partner_markup, "
        f"${ctx.file.workspace.plan_limit_usd}), register facility "
        f"{ctx.file.booking_system.hotel_id} in the gateway and link its kross row"
    )


# --- notes integration -------------------------------------------------------------------------


async def _notion_row(ctx: OnboardingContext) -> IntegrationView | None:
    return await ctx.customers.integrations.for_student(ctx.student_id, NOTION_PROVIDER)


async def check_notion_integration(ctx: OnboardingContext) -> StepResult:
    """A ``notes`` integration row, ``connected``, on the file's database and token."""
    row = await _notion_row(ctx)
    if row is None:
        return StepResult(done=False, message="no notes integration row")
    evidence: dict[str, Any] = {
        "integration_id": row.id,
        "provider": row.provider,
        "status": row.status,
        "apartments_database_id": row.apartments_database_id,
        "token": "stored encrypted" if row.has_token else "missing",
    }
    if row.status != "connected" or not row.has_token:
        return StepResult(
            done=False, evidence=evidence, message=f"the notes row is {row.status}, not connected"
        )
    if row.apartments_database_id != ctx.file.notes.apartments_database_id:
        return StepResult(
            done=False, evidence=evidence, message="the notes row names another database"
        )
    try:
        stored = await ctx.customers.notion_token(row.id)
    except (VaultError, PmsgateError):
        stored = None
    if not _same_secret(stored, ctx.file.notes.token):
        return StepResult(
            done=False, evidence=evidence, message="the notes row holds another token"
        )
    return StepResult(
        done=True,
        evidence=evidence,
        message=f"notes row {row.id} connected to database {row.apartments_database_id}",
    )


async def apply_notion_integration(ctx: OnboardingContext) -> None:
    """Connect the notes workspace: the token is checked, then stored encrypted."""
    notes = ctx.file.notes
    await connect_notion(
        ctx.customers,
        ctx.student_id,
        notes.token,
        notes.apartments_database_id,
        notes_workspace_id=notes.workspace_id,
    )


async def describe_notion_integration(ctx: OnboardingContext) -> str:
    """What apply_notion_integration would do."""
    return (
        f"connect the notes workspace (database {ctx.file.notes.apartments_database_id}); "
        "the token is verified, then stored encrypted"
    )


# --- workspace ---------------------------------------------------------------------------------


async def check_workspace(ctx: OnboardingContext) -> StepResult:
    """The workspace id is recorded and ``GET /v1/workspaces`` lists it."""
    config = await ctx.customers.workspaces.find(ctx.student_id)
    if config is None or config.workspace_id is None:
        return StepResult(done=False, message="no workspace id recorded")
    try:
        workspaces = await ctx.customers.assistant.list_workspaces()
    except AssistantError as error:
        raise upstream_error(error, "listing the workspaces") from None
    found = next((w for w in workspaces if w.id == config.workspace_id), None)
    if found is None:
        return StepResult(
            done=False,
            evidence={"workspace_id": config.workspace_id},
            message=f"workspace {config.workspace_id} is not on the platform",
        )
    return StepResult(
        done=True,
        evidence={"workspace_id": found.id, "slug": found.slug, "name": found.name},
        message=f"workspace {found.slug or found.name} has id {found.id}",
    )


async def apply_workspace(ctx: OnboardingContext) -> None:
    """Create the workspace if absent (by slug) and record its id."""
    workspace = ctx.file.workspace
    await configure_workspace(
        ctx.customers,
        ctx.student_id,
        plan_limit_usd=workspace.plan_limit_usd,
        alert_threshold_pct=workspace.alert_threshold_pct,
        workspace_name=workspace_name(ctx),
        workspace_slug=workspace_slug(ctx),
        notes=workspace.notes,
    )


async def describe_workspace(ctx: OnboardingContext) -> str:
    """What apply_workspace would do."""
    return f"create workspace {workspace_slug(ctx)} on the platform if absent and record its id"


# --- platform-team admin -----------------------------------------------------------------------


async def _workspace_id(ctx: OnboardingContext) -> str | None:
    config = await ctx.customers.workspaces.find(ctx.student_id)
    return config.workspace_id if config is not None else None


async def check_platform_admin(ctx: OnboardingContext) -> StepResult:
    """At least one platform-team member of the file has the Admin role in the workspace."""
    admins = ctx.file.platform_admins
    workspace_id = await _workspace_id(ctx)
    if workspace_id is None:
        return StepResult(done=False, message="no workspace yet (step 5)")
    try:
        members = await ctx.customers.assistant.list_members(workspace_id)
    except AssistantError as error:
        raise upstream_error(error, "listing the workspace's members") from None
    found = [m for m in members if m.email.lower() in admins and m.role == ADMIN_ROLE]
    if not found:
        return StepResult(
            done=False,
            evidence={"platform_admins": admins},
            message="no platform-team member has the Admin role",
        )
    return StepResult(
        done=True,
        evidence={"workspace_id": workspace_id, "admins": sorted(m.email for m in found)},
        message=f"{found[0].email} is Admin of the workspace",
    )


async def apply_platform_admin(ctx: OnboardingContext) -> None:
    """Give the file's first platform-team member the Admin role (adding them if absent)."""
    workspace_id = await _workspace_id(ctx)
    if workspace_id is None:
        raise workspace_not_created(ctx.student_id)
    email = ctx.file.platform_admins[0]
    assistant = ctx.customers.assistant
    try:
        members = await assistant.list_members(workspace_id)
        member = next((m for m in members if m.email.lower() == email), None)
        if member is None:
            await assistant.add_member(
                workspace_id,
                email,
                ADMIN_ROLE,
                idempotency_key=f"onboarding:{ctx.student_id}:admin:{email}",
            )
        elif member.role != ADMIN_ROLE:
            await assistant.set_member_role(
                workspace_id,
                member.id,
                ADMIN_ROLE,
                idempotency_key=f"onboarding:{ctx.student_id}:admin-role:{member.id}",
            )
    except AssistantError as error:
        raise upstream_error(error, "adding the platform-team Admin") from None


async def describe_platform_admin(ctx: OnboardingContext) -> str:
    """What apply_platform_admin would do."""
    return f"give {ctx.file.platform_admins[0]} the Admin role in the workspace"


PREREQUISITES = Step(
    number=1,
    id="prerequisites",
    title="Prerequisites",
    kind=StepKind.CHECK,
    routes=BOTH_ROUTES,
    check=check_prerequisites,
)
ALLOWLIST = Step(
    number=2,
    id="allowlist",
    title="Allowlist entry",
    kind=StepKind.AUTO,
    routes=BOTH_ROUTES,
    check=check_allowlist,
    apply=apply_allowlist,
    describe=describe_allowlist,
)
WORKSPACE_CONFIGURATION = Step(
    number=3,
    id="workspace-configuration",
    title="Workspace configuration",
    kind=StepKind.AUTO,
    routes=BOTH_ROUTES,
    check=check_workspace_configuration,
    apply=apply_workspace_configuration,
    describe=describe_workspace_configuration,
)
NOTION_INTEGRATION = Step(
    number=4,
    id="notes-integration",
    title="Notes integration connected",
    kind=StepKind.AUTO,
    routes=BOTH_ROUTES,
    check=check_notion_integration,
    apply=apply_notion_integration,
    describe=describe_notion_integration,
)
WORKSPACE = Step(
    number=5,
    id="workspace",
    title="Workspace created, id read back",
    kind=StepKind.AUTO,
    routes=BOTH_ROUTES,
    check=check_workspace,
    apply=apply_workspace,
    describe=describe_workspace,
    by_hand=PersonTask(
        "In the platform dashboard, create the customer's workspace (the name and slug of "
        "the customer file) and give the account token access to it; the next run finds it "
        "in GET /v1/workspaces and records its id.",
        "the workspace id and name as the dashboard shows them",
    ),
)
PLATFORM_ADMIN = Step(
    number=8,
    id="platform-admin",
    title="Platform-team Admin in the workspace",
    kind=StepKind.AUTO,
    routes=BOTH_ROUTES,
    check=check_platform_admin,
    apply=apply_platform_admin,
    describe=describe_platform_admin,
    by_hand=PersonTask(
        "In the platform dashboard, add the platform team's admins of the customer file to "
        "the workspace with the Admin role.",
        "the e-mails added and their role",
    ),
)
