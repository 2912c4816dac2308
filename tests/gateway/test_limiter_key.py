"""Whose budget a request spends: one function makes the limiter key, one reads it."""

from __future__ import annotations

from pmsgate.gateway.limiter import account_of, limiter_key


def test_a_facility_budget_is_keyed_by_its_hotel_id() -> None:
    key = limiter_key("439563", "api123", by_account=False)
    assert key == "439563"
    assert account_of(key) is None


def test_an_account_budget_is_keyed_by_the_api_user_and_read_back() -> None:
    key = limiter_key("439563", "api123", by_account=True)
    assert key != "439563"
    assert account_of(key) == "api123"
    # Two facilities of one account share the key.
    assert limiter_key("111", "api123", by_account=True) == key
