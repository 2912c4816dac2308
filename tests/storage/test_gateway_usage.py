"""The hourly gateway usage repository works in the caller's transaction and never commits.

What the gateway does with the counts (UsageCounter, UsageHistory) is tested in
tests/gateway/test_usage.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pmsgate.gateway.usage import UsageHistory
from pmsgate.storage.gateway_usage import GatewayUsageRepository, HourCounts, UsageTotal

pytestmark = pytest.mark.anyio

NINE = datetime(2026, 11, 22, 9, tzinfo=UTC)


async def test_the_repository_writes_in_the_callers_transaction_and_never_commits(
    sessions,  # type: ignore[no-untyped-def]
) -> None:
    async with sessions() as session:
        assert await GatewayUsageRepository(session).add({("100", NINE): HourCounts(1, 1)}) == 1
        await session.rollback()
    assert await UsageHistory(sessions).total("100") == UsageTotal(0, 0)
    async with sessions.begin() as session:
        await GatewayUsageRepository(session).add({("100", NINE): HourCounts(1, 1)})
    assert await UsageHistory(sessions).total("100") == UsageTotal(1, 1)
