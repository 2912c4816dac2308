"""The onboarding tests' sandbox customer (see sandbox_customer.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.onboarding.sandbox_customer import OnboardingSandbox, onboarding_sandbox


@pytest.fixture
async def box(database_url: str, tmp_path: Path) -> AsyncIterator[OnboardingSandbox]:
    """A fresh sandbox, the onboarding services on it and the seeded customer's file, with
    ``tmp_path`` as the data directory."""
    async with onboarding_sandbox(database_url, tmp_path) as sandbox:
        yield sandbox
