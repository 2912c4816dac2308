"""The admin HTTP API: the powers of `pmsgate facilities …` over HTTP.

Design: :func:`build_admin_router` returns an ``APIRouter`` (prefix ``/admin``)
built from three injected things, so the composition root decides their
lifetimes and tests pass real ones:

- ``get_service`` — called per request, returns the :class:`FacilityService`
  (the app reads ``app.state.container.gateway.facilities``, set once its container
  is built);
- ``admin_token`` — ``PMSGATE_ADMIN_TOKEN``; when unset every admin call answers
  503 ``admin_api_disabled`` (the API is off, not open);
- ``reconnect_facility`` — the process's one reconnect path
  (:func:`pmsgate.customers.reconnect.reconnect_facility`: verified upstream before
  anything is stored, new token, fresh reads, listings syncs restarted).

Every route needs ``Authorization: Bearer <PMSGATE_ADMIN_TOKEN>`` (compared in
constant time; wrong or missing → 401 ``invalid_admin_token``). Errors are the
service's JSON error body, rendered by :func:`pmsgate.errors.install_error_handlers`,
which the app must install. Answers that carry a raw gateway key are sent with
``Cache-Control: no-store``.

Routes: ``POST /admin/facilities`` (201: facility + gateway_key),
``GET /admin/facilities``, ``GET /admin/facilities/{hotel_id}``,
``PUT /admin/facilities/{hotel_id}/limits``, ``POST /admin/facilities/{hotel_id}/keys``
(201: key + gateway_key), ``GET /admin/facilities/{hotel_id}/keys``,
``DELETE /admin/facilities/{hotel_id}/keys/{key_id}``,
``PUT /admin/facilities/{hotel_id}/keys/{key_id}/scopes`` (replace, or widen with
``"add": true``; ``"all_scopes": true`` for every scope),
``POST /admin/facilities/{hotel_id}/keys/{key_id}/rotate`` (201: a key with the same
scopes; the old one expires after ``grace_hours``),
``POST /admin/facilities/{hotel_id}/reconnect`` (verified first; 422 with the
booking system's reason when refused, and nothing changed).
"""

# No `from __future__ import annotations` here: FastAPI must evaluate the route
# annotations at definition time, and they refer to dependencies local to the builder.

import hmac
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Path, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from pmsgate.audit.actions import Actor
from pmsgate.boundary import (
    API_KEY_SCHEMA,
    HOTEL_ID_SCHEMA,
    NOT_BLANK_TEXT_PATTERN,
    IdInt32,
    Int32,
    SafeText,
    api_password_field,
    api_user_field,
)
from pmsgate.errors import InvalidInput, PmsgateError, Unauthorized
from pmsgate.gateway.context import gateway_services
from pmsgate.gateway.facilities import KINDS, FacilityView, KeyView, Limits, NewFacility
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.scopes import DEFAULT_SCOPES, all_scopes

_bearer = HTTPBearer(auto_error=False, description="PMSGATE_ADMIN_TOKEN")

# Who the audit trail names for the admin API's key and facility changes: the holder of
# PMSGATE_ADMIN_TOKEN (one shared token, so no person's name).
ADMIN_API_ACTOR = Actor.admin("admin-api")


# --- what the database can store, checked at the boundary ----------------------------------
# PostgreSQL refuses a control character such as NUL in text and an integer beyond its
# column (INTEGER, 32 bits, for limits and key ids); SQLite stores both. Refused here with
# the shared input rules (pmsgate.boundary): 422 on either database, never a driver 500.

StoredText = SafeText
StoredInt = Int32
HotelIdPath = Annotated[SafeText, Path(description="The facility's hotel_id.")]
KeyIdPath = Annotated[IdInt32, Path(ge=1, description="The key's id.")]
# Each budget is at least one call (the service refuses less: invalid_limits).
PositiveInt = Annotated[StoredInt, Field(json_schema_extra={"minimum": 1})]
# Scope names as the schema states them: the vocabulary, nothing else (invalid_scope).
ScopeName = Annotated[StoredText, Field(json_schema_extra=lambda schema: _scope_enum(schema))]


def _scope_enum(schema: dict[str, Any]) -> None:
    schema["enum"] = list(all_scopes())


class LimitsBody(Limits):
    """A facility's upstream budget as the admin API accepts it (within the columns)."""

    per_minute: PositiveInt = Field(default=10, description="Upstream calls per minute.")
    per_hour: PositiveInt = Field(default=300, description="Upstream calls per hour.")
    per_day: PositiveInt = Field(default=5000, description="Upstream calls per day.")


class NewFacilityBody(NewFacility):
    """What registering a facility needs, as the admin API accepts it (storable values).

    A facility of kind ``own`` brings its api key; a ``partner`` one uses the shared key.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"properties": {"kind": {"const": "partner"}}, "not": {"required": ["api_key"]}},
                {
                    "properties": {"kind": {"const": "own"}, "api_key": {"type": "string"}},
                    "required": ["api_key"],
                },
            ]
        }
    )

    hotel_id: StoredText = Field(
        description="Numeric id of the facility in the booking system.",
        json_schema_extra=HOTEL_ID_SCHEMA,
    )
    username: StoredText = api_user_field()
    password: SecretStr = api_password_field()
    kind: StoredText = Field(
        description="`partner` (shared gateway api key) or `own` (own api key).",
        json_schema_extra={"enum": list(KINDS)},
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="Own facilities only: their api key, 32 hexadecimal characters.",
        json_schema_extra=API_KEY_SCHEMA,
    )
    integration_id: StoredText = Field(
        description="Id of the PMS integration row the facility belongs to.",
        json_schema_extra={"pattern": NOT_BLANK_TEXT_PATTERN},
    )
    name: StoredText = Field(default="", description="A human-readable name.")
    limits: LimitsBody = Field(
        default_factory=LimitsBody, description="Upstream budget of the facility."
    )
    verify: bool = Field(
        default=True,
        description="Try the credentials first (one token request within the facility's "
        "limits; refused: 422 and nothing stored). false: stored as `unverified` until its "
        "first call settles it.",
    )


class CreatedFacility(BaseModel):
    """A registered facility and its first gateway key (shown only in this answer)."""

    facility: FacilityView
    gateway_key: str


class FacilityList(BaseModel):
    """Every registered facility."""

    facilities: list[FacilityView]


class MintKeyBody(BaseModel):
    """Options of a new gateway key: named scopes or every scope, an expiry in days or as a
    moment — one of each pair at most."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {"not": {"required": ["expires_in_days", "expires_at"]}},
                {
                    "not": {
                        "required": ["all_scopes", "scopes"],
                        "properties": {"all_scopes": {"const": True}},
                    }
                },
            ]
        },
    )

    label: StoredText = Field(default="", description="A note telling what the key is for.")
    scopes: list[ScopeName] = Field(
        default_factory=lambda: list(DEFAULT_SCOPES),
        description="What the key may do (docs/gateway.md, Scopes); default tools:read.",
        json_schema_extra={"minItems": 1},
    )
    all_scopes: bool = Field(default=False, description="Every scope (instead of `scopes`).")
    expires_in_days: Annotated[int, Field(ge=1, le=36500)] | None = Field(
        default=None, description="The key stops working after this many days."
    )
    expires_at: datetime | None = Field(
        default=None, description="Or: when it stops working (ISO 8601 with an offset)."
    )


class ScopesBody(BaseModel):
    """New scopes of an existing key."""

    # Either every scope, or at least one named (a key that can do nothing is refused).
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {
                    "properties": {"all_scopes": {"const": True}},
                    "required": ["all_scopes"],
                    "not": {"required": ["scopes"]},
                },
                {
                    "properties": {"scopes": {"minItems": 1}, "all_scopes": {"const": False}},
                    "required": ["scopes"],
                },
            ]
        },
    )

    scopes: list[ScopeName] = Field(default_factory=list, description="The scopes.")
    all_scopes: bool = Field(default=False, description="Every scope (instead of `scopes`).")
    add: bool = Field(default=False, description="Add to the key's scopes instead of replacing.")


class RotateBody(BaseModel):
    """How long the old key keeps working next to its replacement."""

    model_config = ConfigDict(extra="forbid")

    grace_hours: Annotated[int, Field(ge=0, le=24 * 365)] = Field(
        default=24 * 7, description="Hours the old key keeps working (default 7 days)."
    )


class MintedKey(BaseModel):
    """A new gateway key (shown only in this answer)."""

    key: KeyView
    gateway_key: str


class RotatedKey(MintedKey):
    """The replacement key (shown only in this answer) and the old key with its expiry."""

    old_key: KeyView


def _named_scopes(body: MintKeyBody) -> list[str]:
    """The scopes the body names: ``tools:read`` by default, none when it asks for all."""
    if "scopes" in body.model_fields_set:
        return body.scopes
    return [] if body.all_scopes else list(DEFAULT_SCOPES)


def _chosen_scopes(scopes: list[str], every: bool) -> list[str]:
    if every and scopes:
        raise InvalidInput(
            "all_scopes and scopes exclude each other.",
            code="invalid_scope",
            hint="Send either `all_scopes: true` or a list of scopes.",
        )
    return list(all_scopes()) if every else scopes


class KeyList(BaseModel):
    """Every gateway key of a facility, revoked ones included."""

    keys: list[KeyView]


class ReconnectBody(BaseModel):
    """New booking-system credentials of a facility."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    username: StoredText = api_user_field()
    password: SecretStr = api_password_field()
    api_key: SecretStr | None = Field(
        default=None,
        description="Own facilities: a new api key, or omit to keep the stored one. "
        "Partner facilities: omit (the shared key is used).",
        json_schema_extra=API_KEY_SCHEMA,
    )


def _no_store(response: Response) -> None:
    response.headers["Cache-Control"] = "no-store"


class Reconnect(Protocol):
    """Replaces a facility's credentials once the booking system accepted them."""

    def __call__(
        self,
        hotel_id: str,
        *,
        username: str,
        password: SecretStr,
        api_key: SecretStr | None,
        actor: Actor,
    ) -> Awaitable[FacilityView]: ...


class Register(Protocol):
    """Registers a facility after trying its credentials (or ``unverified`` without)."""

    def __call__(
        self, new: NewFacility, *, verify: bool, actor: Actor
    ) -> Awaitable[tuple[FacilityView, str]]: ...


def facility_registrar(request: Request) -> Register:
    """The gateway's :meth:`~pmsgate.gateway.service.Gateway.add_facility` (a dependency).

    Registration tries the credentials through the gateway's limiter and keeps the token it
    got, so it needs the whole gateway, not only the facility service.
    """
    register: Register = gateway_services(request).gateway.add_facility
    return register


def build_admin_router(
    get_service: Callable[[], FacilityService],
    admin_token: SecretStr | None,
    reconnect_facility: Reconnect,
) -> APIRouter:
    """The admin API router, guarded by the admin bearer token."""

    async def require_admin(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        if admin_token is None or not admin_token.get_secret_value():
            raise PmsgateError(
                "The admin API is disabled.",
                code="admin_api_disabled",
                status=503,
                hint="Set PMSGATE_ADMIN_TOKEN to enable it.",
            )
        presented = credentials.credentials if credentials is not None else ""
        if not hmac.compare_digest(presented.encode(), admin_token.get_secret_value().encode()):
            raise Unauthorized(
                "Missing or wrong admin token.",
                code="invalid_admin_token",
                hint="Send `Authorization: Bearer <PMSGATE_ADMIN_TOKEN>`.",
                headers={"WWW-Authenticate": "Bearer"},
            )

    def service() -> FacilityService:
        return get_service()

    router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(require_admin)])
    _facility_routes(router, service)
    _key_routes(router, service)

    @router.post("/facilities/{hotel_id}/reconnect", response_model=FacilityView)
    async def reconnect(hotel_id: HotelIdPath, body: ReconnectBody) -> FacilityView:
        """Replace the facility's credentials once the booking system accepts them."""
        return await reconnect_facility(
            hotel_id,
            username=body.username,
            password=body.password,
            api_key=body.api_key,
            actor=ADMIN_API_ACTOR,
        )

    return router


def _facility_routes(router: APIRouter, service: Callable[[], FacilityService]) -> None:
    """Register, list, show a facility; change its limits."""
    Service = Annotated[FacilityService, Depends(service)]

    @router.post("/facilities", status_code=status.HTTP_201_CREATED, response_model=CreatedFacility)
    async def add_facility(
        body: NewFacilityBody,
        register: Annotated[Register, Depends(facility_registrar)],
        response: Response,
    ) -> CreatedFacility:
        """Register a facility; the answer holds its first gateway key, shown only once.

        The credentials are tried first (refused: 422 ``pms_auth_failed``, nothing stored);
        ``"verify": false`` stores it ``unverified``.
        """
        view, raw_key = await register(body, verify=body.verify, actor=ADMIN_API_ACTOR)
        _no_store(response)
        return CreatedFacility(facility=view, gateway_key=raw_key)

    @router.get("/facilities", response_model=FacilityList)
    async def list_facilities(facilities: Service) -> FacilityList:
        """Every registered facility."""
        return FacilityList(facilities=await facilities.list())

    @router.get("/facilities/{hotel_id}", response_model=FacilityView)
    async def show_facility(hotel_id: HotelIdPath, facilities: Service) -> FacilityView:
        """One facility."""
        return await facilities.get(hotel_id)

    @router.put("/facilities/{hotel_id}/limits", response_model=FacilityView)
    async def set_limits(
        hotel_id: HotelIdPath, body: LimitsBody, facilities: Service
    ) -> FacilityView:
        """Change a facility's upstream budget."""
        return await facilities.set_limits(hotel_id, body)


def _key_routes(router: APIRouter, service: Callable[[], FacilityService]) -> None:
    """Mint, change the scopes of, rotate, list and revoke a facility's gateway keys."""
    Service = Annotated[FacilityService, Depends(service)]

    @router.post(
        "/facilities/{hotel_id}/keys",
        status_code=status.HTTP_201_CREATED,
        response_model=MintedKey,
    )
    async def mint_key(
        hotel_id: HotelIdPath,
        facilities: Service,
        response: Response,
        body: MintKeyBody | None = None,
    ) -> MintedKey:
        """A new gateway key for the facility, shown only once (default scope tools:read)."""
        body = body or MintKeyBody()
        if body.expires_in_days is not None and body.expires_at is not None:
            raise InvalidInput(
                "expires_in_days and expires_at exclude each other.",
                code="invalid_expiry",
                hint="Send one of them (or neither, for a key that does not expire).",
            )
        expires_at = body.expires_at
        if body.expires_in_days is not None:
            expires_at = facilities.now() + timedelta(days=body.expires_in_days)
        view, raw_key = await facilities.mint_key(
            hotel_id,
            body.label,
            scopes=_chosen_scopes(_named_scopes(body), body.all_scopes),
            expires_at=expires_at,
            actor=ADMIN_API_ACTOR,
        )
        _no_store(response)
        return MintedKey(key=view, gateway_key=raw_key)

    @router.put("/facilities/{hotel_id}/keys/{key_id}/scopes", response_model=KeyView)
    async def set_key_scopes(
        hotel_id: HotelIdPath, key_id: KeyIdPath, body: ScopesBody, facilities: Service
    ) -> KeyView:
        """Replace a key's scopes, or widen them with `add`."""
        return await facilities.set_key_scopes(
            hotel_id,
            key_id,
            _chosen_scopes(body.scopes, body.all_scopes),
            add=body.add,
            actor=ADMIN_API_ACTOR,
        )

    @router.post(
        "/facilities/{hotel_id}/keys/{key_id}/rotate",
        status_code=status.HTTP_201_CREATED,
        response_model=RotatedKey,
    )
    async def rotate_key(
        hotel_id: HotelIdPath,
        key_id: KeyIdPath,
        facilities: Service,
        response: Response,
        body: RotateBody | None = None,
    ) -> RotatedKey:
        """A new key with the same scopes; the old one keeps working for the grace period."""
        grace = timedelta(hours=(body or RotateBody()).grace_hours)
        old, new, raw_key = await facilities.rotate_key(
            hotel_id, key_id, grace, actor=ADMIN_API_ACTOR
        )
        _no_store(response)
        return RotatedKey(key=new, gateway_key=raw_key, old_key=old)

    @router.get("/facilities/{hotel_id}/keys", response_model=KeyList)
    async def list_keys(hotel_id: HotelIdPath, facilities: Service) -> KeyList:
        """Every gateway key of the facility (prefixes only)."""
        return KeyList(keys=await facilities.list_keys(hotel_id))

    @router.delete("/facilities/{hotel_id}/keys/{key_id}", response_model=KeyView)
    async def revoke_key(hotel_id: HotelIdPath, key_id: KeyIdPath, facilities: Service) -> KeyView:
        """Revoke one gateway key of the facility."""
        return await facilities.revoke_key(hotel_id, key_id, actor=ADMIN_API_ACTOR)
