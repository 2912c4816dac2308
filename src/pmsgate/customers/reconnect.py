"""Reconnecting a booking system with new credentials: the one path (docs/requirements.md R11.4).

:func:`reconnect_facility` is the one reconnect of a facility, whoever asks for it:
``pmsgate facilities reconnect``, the admin API (``POST /admin/facilities/{id}/reconnect``)
and the web app (through :func:`connect_kross`). It verifies and stores the credentials,
gives the gateway the new token, drops the answers read with the old ones and restarts
the listings sync of every customer whose kross row is linked to the facility (steps 3-5
below). :func:`connect_kross` is what ``PUT /api/admin/kross/connect`` (and the
customer's own reconnect form) runs: it resolves the customer's facility first. In order:

1. the credentials are checked against docs/requirements.md R2 (each rule its own code);
2. the customer must have a kross integration row linked to a gateway facility;
3. the booking system is asked for a token with them **before anything is stored**
   (:meth:`~pmsgate.gateway.credentials.FacilityCredentials.reconnect` verifies, then
   stores): a refusal is a 422 ``pms_credentials_rejected`` and nothing has changed —
   vault, facility, integration row, stored token;
4. on success the vault holds the new ciphertext, the facility and its kross row are
   ``connected`` (one transaction), and the gateway forgets the old token and its
   cached answers;
5. the listings sync restarts: the platform's own booking-system connection (an
   *assumed* endpoint, docs/assistant-api.md) gets the new credentials when the
   workspace has one, and the registry's listings sync runs at once. A workspace
   without a connection (Route B) has nothing to restart (``not_applicable``); a
   platform that fails leaves the sync *due* (``pms_integrations.listings_sync_due_at``)
   for the scheduled job, and the reconnect still succeeds (``scheduled``).

Neither the password nor the api key is ever logged, returned or put in an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import structlog
from pydantic import SecretStr

from pmsgate.audit.actions import Actor
from pmsgate.customers.context import KROSS_PROVIDER, CustomerServices
from pmsgate.customers.registry_check import refresh_after_sync
from pmsgate.customers.service import RegistrySyncResult, pms_not_linked, sync_registry
from pmsgate.errors import Conflict, InvalidInput, PmsgateError
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.verification import kross_verifier
from pmsgate.integrations.assistant.errors import AssistantError
from pmsgate.integrations.kross.client import Token
from pmsgate.integrations.kross.credentials import credential_problems

log = structlog.get_logger(__name__)

ListingsSync = Literal["restarted", "scheduled", "not_applicable"]

# The audit trail's actor when the caller names none (the admin API's reconnect route).
RECONNECT_ACTOR = Actor.system("reconnect")

# Stands in for a value the caller may leave out (hotel_id, api_key) while the other
# fields are checked (docs/requirements.md R2); the real ones are checked by the reconnect.
_ANY_HOTEL_ID = "1"
_ANY_API_KEY = "0" * 32

# The codes FacilityService.reconnect gives when the booking system refused the credentials.
_REFUSALS = frozenset({"pms_auth_failed", "pms_invalid_request"})


@dataclass(frozen=True)
class KrossConnection:
    """The outcome of a reconnect: the resulting status and what happened to the listings sync."""

    student_id: str
    hotel_id: str
    status: str
    listings_sync: ListingsSync
    registry: RegistrySyncResult | None

    @property
    def listings(self) -> int | None:
        """The platform's listings count read by the restarted sync (None when it did not run)."""
        return self.registry.listings if self.registry is not None else None

    def as_json(self) -> dict[str, Any]:
        """The web API's answer (camelCase; never a credential)."""
        registry = None
        if self.registry is not None:
            registry = {
                "apartments": self.registry.apartments,
                "created": self.registry.created,
                "updated": self.registry.updated,
                "withoutListing": self.registry.without_listing,
                "withoutNotesPage": self.registry.without_notes_page,
            }
        return {
            "studentId": self.student_id,
            "hotelId": self.hotel_id,
            "status": self.status,
            "listingsSync": self.listings_sync,
            "listings": self.listings,
            "registry": registry,
        }


def pms_facility_not_registered(student_id: str, integration_id: str) -> Conflict:
    """The error for a kross row that no gateway facility is linked to."""
    return Conflict(
        f"The booking-system integration row {integration_id} of {student_id} is not linked "
        "to a gateway facility.",
        code="pms_facility_not_registered",
        hint=f"Register the facility with `pmsgate facilities add … --integration-id "
        f"{integration_id}`, then `pmsgate customers link-kross {student_id} --hotel-id …`.",
    )


def _check_rules(
    hotel_id: str | None, username: str, password: SecretStr, api_key: SecretStr | None
) -> None:
    """docs/requirements.md R2, each rule its own code; a value left out is not checked here."""
    given_key = api_key if api_key is not None and api_key.get_secret_value().strip() else None
    problems = credential_problems(
        hotel_id if hotel_id is not None else _ANY_HOTEL_ID,
        username,
        password,
        given_key if given_key is not None else _ANY_API_KEY,
    )
    if problems:
        raise problems[0]


@dataclass(frozen=True)
class ListingsRestart:
    """What the reconnect did to the listings sync of one customer linked to the facility."""

    student_id: str
    integration_id: str
    listings_sync: ListingsSync
    registry: RegistrySyncResult | None


@dataclass(frozen=True)
class Reconnected:
    """A facility with its new credentials, and the listings syncs it restarted."""

    facility: FacilityView
    restarts: tuple[ListingsRestart, ...]

    def restart_of(self, integration_id: str) -> ListingsRestart | None:
        """The restart of one kross row (None when the row is not linked to the facility)."""
        return next((r for r in self.restarts if r.integration_id == integration_id), None)


async def reconnect_facility(
    customers: CustomerServices,
    gateway: GatewayServices,
    hotel_id: str,
    *,
    username: str,
    password: SecretStr,
    api_key: SecretStr | None,
    actor: Actor = RECONNECT_ACTOR,
) -> Reconnected:
    """The one reconnect: verify, store, new token, fresh reads, listings syncs restarted.

    The credentials are tried upstream before anything is stored (a refusal changes
    nothing: the old credentials and status stay); the token request takes a permit of
    the facility's budget, so attempts cannot make the gateway hammer the booking system.
    ``actor`` is who the audit trail names (credentials.changed / credentials.reconnected).
    """
    # The token that proves the new credentials becomes the facility's token (one session).
    issued: list[Token] = []
    verified_at = gateway.clock.now()
    facility = await gateway.facilities.reconnect(
        hotel_id,
        username=username,
        password=password,
        api_key=api_key,
        verify=kross_verifier(gateway.kross, gateway.gateway.token_permit, keep=issued.append),
        actor=actor,
    )
    # The old token and the answers read with it belong to the old credentials.
    if issued:
        await gateway.tokens.adopt(facility.hotel_id, issued[-1], verified_at)
    else:
        await gateway.tokens.forget(facility.hotel_id)
    await gateway.cache.invalidate(facility.hotel_id)

    given_key = api_key if api_key is not None and api_key.get_secret_value().strip() else None
    restarts = []
    for row in await customers.integrations.all(provider=KROSS_PROVIDER):
        if row.facility_hotel_id != facility.hotel_id:
            continue
        ctx = await customers.context(row.student_id)
        listings_sync, registry = await _restart_listings_sync(
            customers,
            student_id=ctx.student_id,
            integration_id=row.id,
            workspace_id=ctx.workspace_id,
            hotel_id=facility.hotel_id,
            username=facility.username,
            password=password,
            api_key=given_key,
        )
        restarts.append(ListingsRestart(ctx.student_id, row.id, listings_sync, registry))
    return Reconnected(facility=facility, restarts=tuple(restarts))


async def connect_kross(
    customers: CustomerServices,
    gateway: GatewayServices,
    student_id: str,
    *,
    username: str,
    password: SecretStr,
    api_key: SecretStr | None,
    hotel_id: str | None = None,
    actor: Actor = RECONNECT_ACTOR,
) -> KrossConnection:
    """Verify new booking-system credentials, store them, reconnect, restart the listings sync.

    ``api_key`` is for own facilities (left out, the stored one is kept); ``hotel_id``,
    when given, must be the facility the customer's kross row is linked to.
    """
    _check_rules(hotel_id, username, password, api_key)
    ctx = await customers.context(student_id)
    row = ctx.kross
    if row is None:
        raise pms_not_linked(ctx.student_id)
    linked = row.facility_hotel_id
    if linked is None:
        raise pms_facility_not_registered(ctx.student_id, row.id)
    if hotel_id is not None and hotel_id.strip() != linked:
        raise Conflict(
            f"The kross row of {ctx.student_id} is linked to facility {linked}, "
            f"not {hotel_id.strip()}.",
            code="hotel_id_mismatch",
            hint="Leave hotelId out, or give the hotel_id the customer's integration is linked "
            "to; moving a customer to another facility is not a reconnect.",
        )

    try:
        reconnected = await reconnect_facility(
            customers,
            gateway,
            linked,
            username=username,
            password=password,
            api_key=api_key,
            actor=actor,
        )
    except PmsgateError as error:
        if error.status == 422 and error.code in _REFUSALS:
            log.info("kross_connect_refused", student_id=ctx.student_id, hotel_id=linked)
            raise InvalidInput(
                error.message,
                code="pms_credentials_rejected",
                hint="Check the API user (apiNNNNN, not the web-portal login) and its password "
                "in the booking-system panel under Settings → API, then try again.",
            ) from None
        raise
    facility = reconnected.facility
    restart = reconnected.restart_of(row.id)
    listings_sync: ListingsSync = restart.listings_sync if restart is not None else "not_applicable"
    registry = restart.registry if restart is not None else None
    current = await customers.integrations.get(row.id)
    said: dict[str, Any] = {
        "student_id": ctx.student_id,
        "hotel_id": facility.hotel_id,
        "status": current.status,
        "listings_sync": listings_sync,
    }
    log.info("kross_connected", **said, listings=registry.listings if registry else None)
    return KrossConnection(**said, registry=registry)


async def _restart_listings_sync(
    customers: CustomerServices,
    *,
    student_id: str,
    integration_id: str,
    workspace_id: str | None,
    hotel_id: str,
    username: str,
    password: SecretStr,
    api_key: SecretStr | None,
) -> tuple[ListingsSync, RegistrySyncResult | None]:
    """Hand the platform the new credentials and run the listings sync; or leave it due."""
    if workspace_id is None:
        return "not_applicable", None
    try:
        assistant = customers.assistant
        current = await assistant.get_kross_connection(workspace_id)
        if current is None:
            # Route B: the platform does not sync listings from the booking system.
            return "not_applicable", None
        updated = await assistant.set_kross_connection(
            workspace_id,
            hotel_id=hotel_id,
            username=username,
            password=password,
            api_key=api_key,
        )
    except (AssistantError, PmsgateError) as error:
        return await _leave_due(customers, student_id, integration_id, error.code), None
    if not updated.healthy:
        # The platform took the credentials but does not authenticate yet: retry later.
        return await _leave_due(
            customers, student_id, integration_id, "pms_connection_unhealthy"
        ), None
    try:
        registry = await sync_registry(customers, student_id)
    except PmsgateError as error:
        return await _leave_due(customers, student_id, integration_id, error.code), None
    # This sync ran with the new credentials: an earlier request for one is fulfilled.
    await customers.integrations.clear_listings_sync_due(integration_id)
    await refresh_after_sync(customers, student_id)
    return "restarted", registry


async def _leave_due(
    customers: CustomerServices, student_id: str, integration_id: str, reason: str
) -> ListingsSync:
    """Mark the listings sync due for the scheduled job; the reconnect itself stands."""
    await customers.integrations.mark_listings_sync_due(integration_id, customers.clock.now())
    log.warning(
        "listings_sync_scheduled",
        student_id=student_id,
        integration_id=integration_id,
        reason=reason,
    )
    return "scheduled"
