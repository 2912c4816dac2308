"""Enrolling a customer: what onboarding, the CLI and the tests run (docs/requirements.md R14, R21).

Each operation is safe to run again: it reads what is stored (and what the
upstream holds) first and writes only what differs, so a second run of a finished
enrolment changes nothing. Upstream failures become :mod:`pmsgate.errors` codes
here, at this one boundary; secrets never appear in a message.

- :func:`register_customer` — the customer row (and its subscription).
- :func:`configure_workspace` — the workspace configuration (billing_mode
  ``partner_markup``), the platform workspace ensured and its id recorded (steps 3, 5).
- :func:`connect_notion` — the notes integration: the token is checked against the
  apartments database first, then stored only as vault ciphertext (step 4).
- :func:`link_kross` / :func:`set_kross_status` — the booking-system integration row,
  linked to the gateway facility, and its ``connected``/``error`` state (docs/requirements.md R11).
- :func:`sync_registry` — the automatic listings sync: one registry row per
  apartment from the platform's listings and the notes apartments database (step 11).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

import structlog
from pydantic import SecretStr

from pmsgate.customers.checks import customer_not_found
from pmsgate.customers.context import (
    KROSS_PROVIDER,
    NOTION_PROVIDER,
    CustomerContext,
    CustomerServices,
)
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.facility_status import integration_status
from pmsgate.gateway.vault import VaultError
from pmsgate.integrations.assistant.client import Listing
from pmsgate.integrations.assistant.errors import AssistantError, AssistantNotFound
from pmsgate.integrations.notion.errors import (
    NotionError,
    NotionForbidden,
    NotionNotFound,
    NotionUnauthorized,
)
from pmsgate.integrations.notion.models import ApartmentPage
from pmsgate.integrations.notion.throttle import NotionThrottle
from pmsgate.storage.apartments import ApartmentView
from pmsgate.storage.customers import CustomerProfile, CustomerView
from pmsgate.storage.integrations import IntegrationView, new_integration_id, token_context
from pmsgate.storage.workspaces import WorkspaceConfigurationView

log = structlog.get_logger(__name__)

_NOT_SLUG = re.compile(r"[^a-z0-9]+")


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """The customer's subscription as billing reports it."""

    subscription_id: str | None
    status: str | None
    price_id: str | None


@dataclass(frozen=True)
class NotionConnection:
    """A connected notes integration and what the token could read (never the token)."""

    integration: IntegrationView
    apartment_pages: int
    created: bool


@dataclass(frozen=True)
class RegistrySyncResult:
    """What one listings sync read and changed in the apartment registry."""

    student_id: str
    listings: int
    notes_pages: int | None  # None: no notes integration, pages not read
    apartments: int
    created: int
    updated: int
    unchanged: int
    without_listing: int
    without_notes_page: int
    ignored_listings: list[str] = field(default_factory=list)
    ignored_pages: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        """Rows created or updated by this sync."""
        return self.created + self.updated

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view: every field, by name."""
        return asdict(self)


# --- errors ------------------------------------------------------------------------------------


def upstream_error(error: AssistantError | NotionError, action: str) -> PmsgateError:
    """An upstream failure as one of the service's errors (its code and hint kept)."""
    upstream = "assistant platform" if isinstance(error, AssistantError) else "notes workspace"
    return PmsgateError(
        f"The {upstream} failed while {action} ({error.code}).",
        code=error.code,
        status=502,
        hint=error.hint,
    )


def workspace_not_created(student_id: str) -> PmsgateError:
    """The error for a customer whose platform workspace id is not recorded yet."""
    return PmsgateError(
        f"Customer {student_id} has no platform workspace recorded.",
        code="workspace_not_created",
        status=409,
        hint="Configure the workspace first (`pmsgate customers configure-workspace`), "
        "which creates it on the platform and records its id.",
    )


def pms_not_linked(student_id: str) -> NotFound:
    """The error for a customer without a booking-system integration row."""
    return NotFound(
        f"Customer {student_id} has no booking-system (kross) integration row.",
        code="pms_not_linked",
        hint="Create it with `pmsgate customers link-kross STUDENT --hotel-id …`.",
    )


# --- customer ----------------------------------------------------------------------------------


async def register_customer(
    services: CustomerServices,
    profile: CustomerProfile,
    *,
    subscription: Subscription | None = None,
    replace: bool = True,
) -> CustomerView:
    """Register the customer (``replace``: upsert its profile; else refuse an existing one)."""
    if replace:
        view = await services.customers.upsert(profile)
    else:
        view = await services.customers.add(profile)
    if subscription is not None and (
        view.subscription_id,
        view.subscription_status,
        view.subscription_price_id,
    ) != (subscription.subscription_id, subscription.status, subscription.price_id):
        view = await services.customers.set_subscription(
            view.student_id,
            subscription_id=subscription.subscription_id,
            status=subscription.status,
            price_id=subscription.price_id,
        )
    log.info("customer_registered", student_id=view.student_id)
    return view


async def require_customer(services: CustomerServices, student_id: str) -> CustomerView:
    """The registered customer; ``customer_not_found`` (with a hint) otherwise."""
    found = await services.customers.find(student_id)
    if found is None:
        raise customer_not_found(student_id.strip())
    return found


# --- workspace ---------------------------------------------------------------------------------


def default_slug(text: str) -> str:
    """A workspace slug made from a name (lower case, words joined by ``-``)."""
    slug = _NOT_SLUG.sub("-", text.strip().lower()).strip("-")[:100].strip("-")
    if not slug:
        raise InvalidInput(
            "No workspace slug can be made from the customer's name.",
            code="invalid_workspace_slug",
            hint="Give the slug explicitly, e.g. `acme-rentals`.",
        )
    return slug


async def configure_workspace(
    services: CustomerServices,
    student_id: str,
    *,
    plan_limit_usd: Decimal | int | str,
    alert_threshold_pct: int,
    workspace_name: str | None = None,
    workspace_slug: str | None = None,
    notes: str = "",
) -> WorkspaceConfigurationView:
    """Upsert the configuration (``partner_markup``), ensure the platform workspace, record its id.

    A workspace id already recorded is kept while the platform still has that
    workspace; otherwise the workspace is found by its slug or created (docs/requirements.md R21.5).
    """
    customer = await require_customer(services, student_id)
    name = (workspace_name or customer.name).strip()
    slug = workspace_slug.strip() if workspace_slug else default_slug(name)
    config = await services.workspaces.upsert(
        customer.student_id,
        workspace_name=name,
        workspace_slug=slug,
        plan_limit_usd=plan_limit_usd,
        alert_threshold_pct=alert_threshold_pct,
        billing_mode="partner_markup",
        notes=notes,
    )
    assistant = services.assistant
    try:
        if config.workspace_id is not None:
            try:
                await assistant.get_workspace(config.workspace_id)
                return config
            except AssistantNotFound:
                log.warning(
                    "workspace_missing_on_platform",
                    student_id=customer.student_id,
                    workspace_id=config.workspace_id,
                )
        workspace = await assistant.ensure_workspace(config.workspace_name, config.workspace_slug)
    except AssistantError as error:
        raise upstream_error(error, "ensuring the workspace") from None
    if workspace.id != config.workspace_id:
        config = await services.workspaces.set_workspace_id(customer.student_id, workspace.id)
    log.info(
        "workspace_configured", student_id=customer.student_id, workspace_id=config.workspace_id
    )
    return config


# --- notes -------------------------------------------------------------------------------------


def _notion_refusal(error: NotionError, database_id: str) -> PmsgateError:
    if isinstance(error, NotionUnauthorized):
        return InvalidInput(
            "The notes workspace refused the integration token.",
            code="notes_token_refused",
            hint="Copy the integration token again from the customer's notes workspace; "
            "nothing was stored.",
        )
    if isinstance(error, NotionNotFound | NotionForbidden):
        return InvalidInput(
            f"The token cannot read the apartments database {database_id}.",
            code="notes_database_not_found",
            hint="Check the database id and share the database with the integration; "
            "nothing was stored.",
        )
    return upstream_error(error, "reading the apartments database")


async def connect_notion(
    services: CustomerServices,
    student_id: str,
    token: SecretStr,
    database_id: str,
    *,
    notes_workspace_id: str | None = None,
) -> NotionConnection:
    """Check the token on the apartments database, store it encrypted (docs/requirements.md R21.4).

    Nothing is stored when the token or the database is refused.
    """
    customer = await require_customer(services, student_id)
    database_id = database_id.strip()
    if not token.get_secret_value().strip() or not database_id:
        raise InvalidInput(
            "A notes token and an apartments database id are both required.",
            code="notes_connection_incomplete",
            hint="Give --database-id and the token (standard input or the hidden prompt).",
        )
    token = SecretStr(token.get_secret_value().strip())
    pages = await _read_apartment_pages(services, token, database_id)
    existing = await services.integrations.for_student(customer.student_id, NOTION_PROVIDER)
    if existing is None:
        row_id = new_integration_id()
        view = await services.integrations.add(
            customer.student_id,
            NOTION_PROVIDER,
            integration_id=row_id,
            status="connected",
            notes_workspace_id=notes_workspace_id,
            apartments_database_id=database_id,
            token_enc=services.vault.encrypt(
                token.get_secret_value(), context=token_context(row_id)
            ),
        )
        created = True
    elif await _same_connection(services, existing, token, database_id, notes_workspace_id):
        # Nothing to write: a re-run of a finished enrolment leaves the row as it is.
        view, created = existing, False
    else:
        view = await services.integrations.set_notion_connection(
            existing.id,
            notes_workspace_id=notes_workspace_id or existing.notes_workspace_id,
            apartments_database_id=database_id,
            token_enc=services.vault.encrypt(
                token.get_secret_value(), context=token_context(existing.id)
            ),
        )
        if view.status != "connected":
            view = await services.integrations.set_status(existing.id, "connected")
        created = False
    log.info(
        "notes_connected",
        student_id=customer.student_id,
        integration_id=view.id,
        apartment_pages=len(pages),
    )
    return NotionConnection(integration=view, apartment_pages=len(pages), created=created)


async def _same_connection(
    services: CustomerServices,
    row: IntegrationView,
    token: SecretStr,
    database_id: str,
    notes_workspace_id: str | None,
) -> bool:
    """True when the row already holds this token and database, connected."""
    if (
        row.status != "connected"
        or not row.has_token
        or row.apartments_database_id != database_id
        or (notes_workspace_id is not None and row.notes_workspace_id != notes_workspace_id)
    ):
        return False
    try:
        stored = await services.notion_token(row.id)
    except VaultError:
        return False  # unreadable with today's keys: store it again under the primary key
    return secrets.compare_digest(stored.get_secret_value(), token.get_secret_value())


async def _read_apartment_pages(
    services: CustomerServices, token: SecretStr, database_id: str
) -> list[ApartmentPage]:
    """Every page of the database, read with a token not stored yet."""
    http = services.http_factory()
    try:
        client = services.notion_client(
            http,
            token,
            throttle=NotionThrottle(
                services.settings.notion_requests_per_second,
                clock=services.clock,
                sleep=services.sleep,
            ),
        )
        return await client.query_database(database_id)
    except NotionError as error:
        raise _notion_refusal(error, database_id) from None
    finally:
        await http.aclose()


# --- booking system ----------------------------------------------------------------------------


async def _facility(services: CustomerServices, hotel_id: str) -> FacilityView | None:
    try:
        return await services.facilities.get(hotel_id)
    except NotFound as error:
        if error.code == "facility_not_found":
            return None
        raise


async def link_kross(services: CustomerServices, student_id: str, hotel_id: str) -> IntegrationView:
    """Create the customer's kross row and link it to the gateway facility of ``hotel_id``.

    The row's id is the facility's ``integration_id`` when the facility is registered
    first; otherwise a fresh one (``int-…``) to register the facility with, after which
    a second call links them. A linked row takes the facility's status.
    """
    customer = await require_customer(services, student_id)
    hotel_id = hotel_id.strip()
    if not hotel_id:
        raise InvalidInput(
            "hotel_id is required.", code="invalid_hotel_id", hint="Give the facility's hotel_id."
        )
    facility = await _facility(services, hotel_id)
    row = await services.integrations.for_student(customer.student_id, KROSS_PROVIDER)
    if row is None:
        row = await services.integrations.add(
            customer.student_id,
            KROSS_PROVIDER,
            integration_id=facility.integration_id if facility is not None else None,
            status=integration_status(facility.status) if facility is not None else "connected",
            last_error=facility.last_error if facility is not None else None,
            facility_hotel_id=hotel_id if facility is not None else None,
        )
        log.info("kross_integration_created", student_id=customer.student_id, integration_id=row.id)
    elif facility is not None and row.facility_hotel_id != facility.hotel_id:
        row = await services.integrations.link_facility(row.id, facility.hotel_id)
    elif facility is None and row.facility_hotel_id not in (None, hotel_id):
        raise Conflict(
            f"The kross row {row.id} of {customer.student_id} is linked to facility "
            f"{row.facility_hotel_id}, and no facility {hotel_id} is registered.",
            code="pms_linked_to_another_facility",
            hint=f"Register facility {hotel_id} with --integration-id {row.id} first, "
            "or give the hotel_id the row is linked to.",
        )
    if facility is not None and (row.status, row.last_error) != (
        integration_status(facility.status),
        facility.last_error if facility.status == "error" else None,
    ):
        # The row knows connected and error: an unverified facility is used like connected.
        row = await services.integrations.set_status(
            row.id, integration_status(facility.status), error=facility.last_error
        )
    if facility is None:
        log.info(
            "kross_integration_unlinked",
            student_id=customer.student_id,
            integration_id=row.id,
            hotel_id=hotel_id,
        )
    return row


async def set_kross_status(
    services: CustomerServices, student_id: str, status: str, error: str | None = None
) -> IntegrationView:
    """Set the kross row ``connected`` or ``error`` with a reason (docs/requirements.md R11.1)."""
    customer = await require_customer(services, student_id)
    row = await services.integrations.for_student(customer.student_id, KROSS_PROVIDER)
    if row is None:
        raise pms_not_linked(customer.student_id)
    view = await services.integrations.set_status(row.id, status, error=error)
    log.info("kross_status_set", student_id=customer.student_id, status=view.status)
    return view


# --- the apartment registry --------------------------------------------------------------------


def listing_room_type(listing: Listing) -> str | None:
    """The room type a listing mirrors: ``external_id``, else ``pms.id_room_type``."""
    if listing.external_id and listing.external_id.strip():
        return listing.external_id.strip()
    kross = (listing.model_extra or {}).get("pms")
    room_type = kross.get("id_room_type") if isinstance(kross, dict) else None
    if isinstance(room_type, int | str) and str(room_type).strip():
        return str(room_type).strip()
    return None


def _room_type_order(room_type: str) -> tuple[int, int, str]:
    return (0, int(room_type), "") if room_type.isdigit() else (1, 0, room_type)


@dataclass
class _Wanted:
    listing: str | None
    page: str | None
    name: str


async def sync_registry(services: CustomerServices, student_id: str) -> RegistrySyncResult:
    """The listings sync: one registry row per apartment, completed in place, never duplicated.

    Apartments are keyed by room type: the platform's listings (booking-system room
    type in ``external_id``) and the notes database's pages (``PMS room type id``).
    A row whose listing is gone (e.g. the booking-system integration is in ``error``,
    so there are no listings) keeps its row without a listing id; without a notes
    integration the pages are not read and notes page ids are left as they are.
    """
    ctx = await services.context(student_id)
    listings, pages = await _listings_and_pages(services, ctx)
    ignored_listings: list[str] = []
    by_listing: dict[str, Listing] = {}
    for listing in listings:
        room_type = listing_room_type(listing)
        if room_type is None or room_type in by_listing:
            ignored_listings.append(listing.id)
            continue
        by_listing[room_type] = listing
    ignored_pages: list[str] = []
    by_page: dict[str, ApartmentPage] = {}
    for page in pages or []:
        if page.archived:
            continue
        room_type = str(page.room_type_id) if page.room_type_id is not None else None
        if room_type is None or room_type in by_page:
            ignored_pages.append(page.id)
            continue
        by_page[room_type] = page
    rows = {row.pms_room_type_id: row for row in ctx.apartments}
    wanted = _wanted_rows(rows, by_listing, by_page, pages_read=pages is not None)
    created, touched = await _write_rows(services, ctx.student_id, rows, wanted)

    after = await services.apartments.of_student(ctx.student_id)
    result = RegistrySyncResult(
        student_id=ctx.student_id,
        listings=len(listings),
        notes_pages=len(pages) if pages is not None else None,
        apartments=len(after),
        created=created,
        updated=len(touched),
        unchanged=len(after) - created - len(touched),
        without_listing=sum(1 for row in after if row.assistant_listing_id is None),
        without_notes_page=sum(1 for row in after if row.notes_page_id is None),
        ignored_listings=ignored_listings,
        ignored_pages=ignored_pages,
    )
    log.info(
        "registry_synced",
        student_id=ctx.student_id,
        listings=result.listings,
        apartments=result.apartments,
        created=result.created,
        updated=result.updated,
    )
    return result


async def _listings_and_pages(
    services: CustomerServices, ctx: CustomerContext
) -> tuple[list[Listing], list[ApartmentPage] | None]:
    """The workspace's listings, and the notes database's pages (None: not read)."""
    if ctx.workspace_id is None:
        raise workspace_not_created(ctx.student_id)
    try:
        listings = await services.assistant.list_listings(ctx.workspace_id)
    except AssistantError as error:
        raise upstream_error(error, "reading the listings") from None
    if not (ctx.notes is not None and ctx.notes.has_token and ctx.notes.apartments_database_id):
        return listings, None
    try:
        async with services.notion(ctx) as notes:
            return listings, await notes.query_database(ctx.notes.apartments_database_id)
    except NotionError as error:
        if isinstance(error, NotionUnauthorized):
            # A revoked token is a state of the integration, not of this one sync.
            await services.integrations.set_status(
                ctx.notes.id, "error", error="the notes API refused the integration token"
            )
        raise upstream_error(error, "reading the apartments database") from None


def _wanted_rows(
    rows: dict[str, ApartmentView],
    by_listing: dict[str, Listing],
    by_page: dict[str, ApartmentPage],
    *,
    pages_read: bool,
) -> dict[str, _Wanted]:
    """What each room type's row should hold, in room-type order."""
    wanted: dict[str, _Wanted] = {}
    for room_type in sorted(set(rows) | set(by_listing) | set(by_page), key=_room_type_order):
        row = rows.get(room_type)
        its_listing = by_listing.get(room_type)
        its_page = by_page.get(room_type)
        name = (
            (its_listing.name.strip() if its_listing is not None else "")
            or (row.name if row is not None else "")
            or (its_page.title.strip() if its_page is not None else "")
        )
        if its_page is not None:
            page_id: str | None = its_page.id
        elif not pages_read:
            # Pages not read: whatever the row holds stays.
            page_id = row.notes_page_id if row is not None else None
        else:
            page_id = None
        wanted[room_type] = _Wanted(
            listing=its_listing.id if its_listing is not None else None, page=page_id, name=name
        )
    return wanted


async def _write_rows(
    services: CustomerServices,
    student_id: str,
    rows: dict[str, ApartmentView],
    wanted: dict[str, _Wanted],
) -> tuple[int, set[str]]:
    """Bring the rows to ``wanted``: how many were created, and which existing ones changed."""
    touched: set[str] = set()
    current = {rt: (row.assistant_listing_id, row.notes_page_id) for rt, row in rows.items()}
    # Detach first: a listing or page moving between apartments would otherwise meet the
    # registry's UNIQUE (student_id, listing) / (student_id, page) half-way.
    for room_type, (listing_id, page_id) in list(current.items()):
        want = wanted[room_type]
        if listing_id is not None and listing_id != want.listing:
            await services.apartments.update_listing(student_id, room_type, None)
            listing_id = None
            touched.add(room_type)
        if page_id is not None and page_id != want.page:
            await services.apartments.update_notion_page(student_id, room_type, None)
            page_id = None
            touched.add(room_type)
        current[room_type] = (listing_id, page_id)
    created = 0
    for room_type, want in wanted.items():
        row = rows.get(room_type)
        if (
            row is not None
            and current[room_type] == (want.listing, want.page)
            and (not want.name or row.name == want.name)
        ):
            continue
        _, was_created = await services.apartments.upsert(
            student_id,
            room_type,
            assistant_listing_id=want.listing,
            notes_page_id=want.page,
            name=want.name or None,
        )
        if was_created:
            created += 1
        else:
            touched.add(room_type)
    return created, touched
