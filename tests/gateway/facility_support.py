"""Helpers of the facility tests: services on a test database, seeded credentials, row dumps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from pydantic import SecretStr
from sqlalchemy import func, select, text

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.gateway.facilities import NewFacility
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.vault import Vault, generate_key_spec
from pmsgate.gateway.verification import Verifier, kross_verifier
from pmsgate.integrations.kross.client import KrossClient
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.storage.db import Base, open_database, session_factory
from pmsgate.storage.models import Facility, GatewayKey

KEY_1 = generate_key_spec("k1")
KEY_2 = generate_key_spec("k2")
PARTNER_KEY = SecretStr(SANDBOX_PARTNER_API_KEY)

OWN_API_KEY = "0123456789abcdef0123456789ABCDEF"


@asynccontextmanager
async def facility_service(
    database_url: str,
    clock: Clock,
    *,
    keys: str = KEY_1,
    partner_api_key: SecretStr | None = PARTNER_KEY,
) -> AsyncIterator[FacilityService]:
    """A service on the (already migrated) test database with the given vault keys."""
    async with open_database(database_url, migrate=False) as engine:
        yield FacilityService(session_factory(engine), Vault(keys), clock, partner_api_key)


def new_facility(**overrides: Any) -> NewFacility:
    """A valid partner facility, with some fields replaced."""
    fields: dict[str, Any] = {
        "hotel_id": "123456",
        "username": "api12345",
        "password": SecretStr("correct horse battery staple"),
        "kind": "partner",
        "api_key": None,
        "integration_id": "int-77",
        "name": "Casa Esempio",
    }
    fields.update(overrides)
    return NewFacility(**fields)


def new_own_facility(password: str, **overrides: Any) -> NewFacility:
    """A valid facility of kind own (its API key :data:`OWN_API_KEY`) with ``password``."""
    return new_facility(
        kind="own", api_key=SecretStr(OWN_API_KEY), password=SecretStr(password), **overrides
    )


async def seeded_facilities(kross_http: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The emulator's seeded facilities with their credentials."""
    answer = await kross_http.get("/_sandbox/facilities")
    answer.raise_for_status()
    facilities: list[dict[str, Any]] = answer.json()
    return facilities


def new_facility_from_seed(
    seed: Mapping[str, Any], scopes: list[str] | None = None, *, integration_id: str | None = None
) -> NewFacility:
    """The registration of an emulator facility with its real credentials.

    ``scopes`` are its first key's (the default: tools:read only, as in production); its
    integration row is ``integration_id`` (default ``int-<hotel_id>``).
    """
    return NewFacility(
        hotel_id=seed["hotel_id"],
        username=seed["username"],
        password=SecretStr(seed["password"]),
        kind=seed["kind"],
        api_key=SecretStr(seed["api_key"]) if seed["kind"] == "own" else None,
        integration_id=integration_id or f"int-{seed['hotel_id']}",
        name=seed["name"],
        **({"scopes": scopes} if scopes is not None else {}),
    )


def emulator_verifier(kross_http: httpx.AsyncClient, clock: Clock) -> Verifier:
    """A verifier asking the booking-system emulator for a token, through the real client."""
    settings = Settings(kross_base_url=str(kross_http.base_url))
    return kross_verifier(KrossClient.from_settings(settings, kross_http, clock=clock))


async def row_counts(database_url: str) -> tuple[int, int]:
    """How many facilities and gateway keys are stored."""
    async with open_database(database_url, migrate=False) as engine, engine.connect() as conn:
        facilities = (await conn.execute(select(func.count()).select_from(Facility))).scalar_one()
        keys = (await conn.execute(select(func.count()).select_from(GatewayKey))).scalar_one()
    return facilities, keys


async def all_stored_text(database_url: str) -> str:
    """Every column of every row of every table, as one text to search for plaintext."""
    parts: list[str] = []
    async with open_database(database_url, migrate=False) as engine, engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            for row in (await conn.execute(select(table))).all():
                parts.append(repr(tuple(row)))
        parts.append(repr((await conn.execute(text("SELECT * FROM alembic_version"))).all()))
    return "\n".join(parts)
