"""The token manager against the booking-system emulator, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import select

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.limiter import BudgetExhausted, FacilityLimiter
from pmsgate.gateway.locks import Locks, RedisLocks
from pmsgate.gateway.tokens import REFRESH_RETRY_S, TokenManager
from pmsgate.gateway.vault import Vault
from pmsgate.integrations.kross.client import KrossClient, Token
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.errors import AuthenticationFailed
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.models import FacilityToken

from .facility_support import (
    KEY_1,
    all_stored_text,
    facility_service,
    new_facility_from_seed,
    seeded_facilities,
)

pytestmark = pytest.mark.anyio

REFRESH_AHEAD_S = 3600.0
TOKEN_TTL = timedelta(days=7)


class Facility:
    """A seeded emulator facility registered in the test database, and how to reach it."""

    def __init__(
        self,
        seed: dict[str, Any],
        kross_http: httpx.AsyncClient,
        database_url: str,
        clock: ManualClock,
    ) -> None:
        self.seed = seed
        self.hotel_id: str = seed["hotel_id"]
        self.kross_http = kross_http
        self.database_url = database_url
        self.clock = clock
        self.limiter = FacilityLimiter(clock=clock)
        self.limits = Limits()

    async def credentials(self, hotel_id: str) -> Credentials:
        """The seeded facility's credentials (test data, as the facility service would give)."""
        assert hotel_id == self.hotel_id
        return Credentials(
            hotel_id=self.seed["hotel_id"],
            username=self.seed["username"],
            password=self.seed["password"],
            api_key=self.seed["api_key"],
        )

    async def permit(self, hotel_id: str) -> None:
        await self.limiter.acquire(hotel_id, self.limits)

    @asynccontextmanager
    async def manager(
        self,
        *,
        locks: Locks | None = None,
        acquire_permit: Callable[[str], Awaitable[None]] | None = None,
    ) -> AsyncIterator[TokenManager]:
        """A token manager with its own database engine, as one gateway replica has."""
        async with open_database(self.database_url, migrate=False) as engine:
            settings = Settings(kross_base_url=str(self.kross_http.base_url))
            yield TokenManager(
                kross=KrossClient.from_settings(settings, self.kross_http, clock=self.clock),
                sessions=session_factory(engine),
                vault=Vault(KEY_1),
                clock=self.clock,
                credentials=self.credentials,
                acquire_permit=acquire_permit or self.permit,
                locks=locks,
                refresh_ahead_s=REFRESH_AHEAD_S,
            )

    async def stats(self) -> dict[str, Any]:
        answer = await self.kross_http.get("/_sandbox/stats")
        answer.raise_for_status()
        stats: dict[str, Any] = answer.json()
        return stats

    async def tokens_issued(self) -> int:
        return int((await self.stats())["tokens_issued"]["by_hotel"].get(self.hotel_id, 0))

    async def token_requests(self) -> int:
        return int((await self.stats())["requests"]["by_operation"].get("auth/get-token", 0))


@pytest.fixture
async def facility(
    kross_http: httpx.AsyncClient, database_url: str, clock: ManualClock
) -> Facility:
    seed = (await seeded_facilities(kross_http))[0]
    async with facility_service(database_url, clock) as service:
        await service.add(new_facility_from_seed(seed))
    return Facility(seed, kross_http, database_url, clock)


async def concurrently(n: int, call: Callable[[], Awaitable[Token]]) -> list[Token]:
    results: list[Token] = []

    async def one() -> None:
        results.append(await call())

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return results


def values(tokens: list[Token]) -> set[str]:
    return {t.value.get_secret_value() for t in tokens}


async def test_1000_concurrent_calls_without_a_token_make_one_get_token(
    facility: Facility,
) -> None:
    async with facility.manager() as manager:
        tokens = await concurrently(1000, lambda: manager.token(facility.hotel_id))

    assert len(values(tokens)) == 1
    assert await facility.tokens_issued() == 1
    assert await facility.token_requests() == 1
    # The get-token took a permit from the facility's budget, like every upstream request.
    assert (await facility.limiter.remaining(facility.hotel_id, facility.limits))["minute"] == 9


async def test_two_replicas_sharing_database_and_redis_get_one_token(
    facility: Facility, redis_client: Any, redis_namespace: str
) -> None:
    async with AsyncExitStack() as stack:
        replicas = [
            await stack.enter_async_context(
                facility.manager(locks=RedisLocks(redis_client, namespace=redis_namespace))
            )
            for _ in range(2)
        ]
        results: list[Token] = []

        async def call(replica: TokenManager) -> None:
            results.append(await replica.token(facility.hotel_id))

        async with anyio.create_task_group() as tg:
            for i in range(400):
                tg.start_soon(call, replicas[i % 2])

    assert len(results) == 400
    assert len(values(results)) == 1
    assert await facility.tokens_issued() == 1


async def test_a_token_is_reused_until_refresh_ahead_then_refreshed_once(
    facility: Facility, clock: ManualClock
) -> None:
    async with facility.manager() as manager:
        first = await manager.token(facility.hotel_id)
        assert first.expires_at == clock.now() + TOKEN_TTL

        clock.advance(TOKEN_TTL.total_seconds() - REFRESH_AHEAD_S - 1)
        assert await manager.token(facility.hotel_id) == first
        assert await facility.tokens_issued() == 1

        clock.advance(2)
        renewed = await concurrently(100, lambda: manager.token(facility.hotel_id))
        assert len(values(renewed)) == 1
        assert renewed[0] != first
        assert await facility.tokens_issued() == 2


async def test_another_replica_reuses_the_stored_token_without_asking_upstream(
    facility: Facility,
) -> None:
    async with facility.manager() as first_replica:
        token = await first_replica.token(facility.hotel_id)
    async with facility.manager() as second_replica:
        assert await second_replica.token(facility.hotel_id) == token
    assert await facility.tokens_issued() == 1


async def test_invalidating_a_stale_token_does_nothing(facility: Facility) -> None:
    async with facility.manager() as manager:
        old = await manager.token(facility.hotel_id)
        await manager.invalidate(facility.hotel_id, old)
        new = await manager.token(facility.hotel_id)
        assert new != old
        assert await facility.tokens_issued() == 2

        await manager.invalidate(facility.hotel_id, old)
        await manager.invalidate(facility.hotel_id, old.value.get_secret_value())
        assert await manager.token(facility.hotel_id) == new

    # Nor does it touch the stored token other replicas read.
    async with facility.manager() as other_replica:
        await other_replica.invalidate(facility.hotel_id, old)
        assert await other_replica.token(facility.hotel_id) == new
    assert await facility.tokens_issued() == 2


async def test_concurrent_401s_for_one_token_cause_one_refresh(facility: Facility) -> None:
    async with facility.manager() as manager:
        rejected = await manager.token(facility.hotel_id)

        async def after_401() -> Token:
            await manager.invalidate(facility.hotel_id, rejected)
            return await manager.token(facility.hotel_id)

        renewed = await concurrently(100, after_401)

    assert len(values(renewed)) == 1
    assert rejected.value.get_secret_value() not in values(renewed)
    assert await facility.tokens_issued() == 2


async def test_the_token_is_stored_encrypted(facility: Facility) -> None:
    async with facility.manager() as manager:
        token = await manager.token(facility.hotel_id)

    stored = await all_stored_text(facility.database_url)
    assert token.value.get_secret_value() not in stored
    async with (
        open_database(facility.database_url, migrate=False) as engine,
        session_factory(engine)() as session,
    ):
        row = (await session.execute(select(FacilityToken))).scalar_one()
    assert row.token_enc.startswith("k1:")
    assert row.expires_at == token.expires_at


async def test_a_wrong_password_fails_once_for_all_concurrent_callers(
    facility: Facility,
) -> None:
    changed = await facility.kross_http.post(
        f"/_sandbox/facilities/{facility.hotel_id}/password", json={"password": "changed-0"}
    )
    changed.raise_for_status()
    failures: list[BaseException] = []

    async with facility.manager() as manager:

        async def call() -> None:
            try:
                await manager.token(facility.hotel_id)
            except AuthenticationFailed as error:
                failures.append(error)

        async with anyio.create_task_group() as tg:
            for _ in range(100):
                tg.start_soon(call)

    assert len(failures) == 100
    assert await facility.token_requests() == 1


async def test_a_failed_refresh_ahead_keeps_serving_the_still_valid_token(
    facility: Facility, clock: ManualClock
) -> None:
    budget_left = True

    async def permit(hotel_id: str) -> None:
        if not budget_left:
            raise BudgetExhausted(retry_after_s=30, window="minute")
        await facility.permit(hotel_id)

    async with facility.manager(acquire_permit=permit) as manager:
        token = await manager.token(facility.hotel_id)
        clock.advance(TOKEN_TTL.total_seconds() - REFRESH_AHEAD_S + 1)

        budget_left = False
        assert await manager.token(facility.hotel_id) == token

        # The next attempt waits a while: until then the valid token is served as it is.
        budget_left = True
        assert await manager.token(facility.hotel_id) == token
        assert await facility.token_requests() == 1
        clock.advance(REFRESH_RETRY_S)
        assert await manager.token(facility.hotel_id) != token
    assert await facility.tokens_issued() == 2


async def test_without_a_valid_token_a_refresh_failure_is_raised(
    facility: Facility, clock: ManualClock
) -> None:
    async def no_budget(hotel_id: str) -> None:
        raise BudgetExhausted(retry_after_s=30, window="minute")

    async with facility.manager(acquire_permit=no_budget) as manager:
        with pytest.raises(BudgetExhausted):
            await manager.token(facility.hotel_id)
    assert await facility.token_requests() == 0
