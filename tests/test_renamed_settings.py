"""The settings renamed to one word per upstream still read their old names, for one release."""

from __future__ import annotations

import logging

import pytest

from pmsgate.config import RENAMED_SETTINGS, Settings

OLD_VALUES = {
    "PMSGATE_PLATFORM_API_URL": "https://old.example",
    "PMSGATE_PLATFORM_API_TOKEN": "old-token",
    "PMSGATE_NOTES_API_URL": "https://old.example",
    "PMSGATE_NOTES_VERSION": "2022-06-28",
    "PMSGATE_NOTES_REQUESTS_PER_SECOND": "2.5",
    "PMSGATE_NOTES_TIMEOUT_S": "7",
}


def shown(value: object) -> str:
    read = value.get_secret_value() if hasattr(value, "get_secret_value") else value
    return str(read).rstrip("/")


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED_SETTINGS.items()))
def test_an_old_name_still_sets_the_value_and_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, old: str, new: str
) -> None:
    value = OLD_VALUES[old]
    monkeypatch.delenv(new, raising=False)
    monkeypatch.setenv(old, value)
    with caplog.at_level(logging.WARNING, logger="pmsgate.config"):
        settings = Settings()
    read = shown(getattr(settings, new.removeprefix("PMSGATE_").lower()))
    assert read == value or float(read) == float(value)
    assert f"{old} is deprecated" in caplog.text and new in caplog.text


def test_the_new_name_wins_and_says_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PMSGATE_PLATFORM_API_URL", "https://old.example")
    monkeypatch.setenv("PMSGATE_ASSISTANT_API_URL", "https://new.example")
    with caplog.at_level(logging.WARNING, logger="pmsgate.config"):
        settings = Settings()
    assert settings.assistant_api_url.rstrip("/") == "https://new.example"
    assert "deprecated" not in caplog.text


def test_a_field_name_still_sets_a_renamed_setting() -> None:
    assert Settings(notion_timeout_s=5).notion_timeout_s == 5
