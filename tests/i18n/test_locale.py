"""Which language and time zone people read, and how dates and times are written for them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pmsgate import i18n
from pmsgate.web.locale import accepted_languages, browser_language

MOMENT = datetime(2026, 11, 26, 19, 40, tzinfo=UTC)  # 20:40 in Rome (winter time)


def test_the_browsers_languages_are_read_in_its_order_of_preference() -> None:
    header = "de-DE,de;q=0.9,it;q=0.8,en;q=0.7,fr;q=0"
    assert accepted_languages(header) == ["de_DE", "de", "it", "en"]
    assert browser_language(header) == "it"
    assert browser_language("en-US,en;q=0.9,it;q=0.8") == "en"
    assert browser_language("it-CH") == "it"
    assert browser_language("fr-FR,de") is None  # neither: the caller falls back to Italian
    assert browser_language(None) is None
    assert browser_language("en;q=abc, it") == "it"  # a broken weight counts for nothing


@pytest.mark.parametrize(
    ("setting", "language"),
    [("it", "it"), ("it-IT", "it"), ("Italian", "it"), ("en_GB", "en"), ("de", "it"), (None, "it")],
)
def test_a_language_setting_maps_to_a_supported_language(
    setting: str | None, language: str
) -> None:
    assert i18n.language_of(setting) == language


def test_times_are_written_in_the_readers_zone_and_locale() -> None:
    with i18n.use_locale("it"):
        assert i18n.format_datetime(MOMENT) == "26 nov 2026, 20:40"
        assert i18n.format_date(MOMENT) == "26 novembre 2026"
        assert i18n.format_ago(MOMENT - timedelta(hours=3), MOMENT) == "3 ore fa"
        assert i18n.format_ago(MOMENT - timedelta(seconds=20), MOMENT) == "proprio ora"
    with i18n.use_locale("en", "America/New_York"):
        assert i18n.format_datetime(MOMENT) == "26 Nov 2026, 14:40"
        assert i18n.format_ago(MOMENT - timedelta(days=1), MOMENT) == "1 day ago"
    summer = datetime(2026, 7, 1, 10, 0, tzinfo=UTC)
    with i18n.use_locale("it"):
        assert i18n.format_time(summer) == "12:00"  # CEST


def test_an_unknown_time_zone_reads_as_rome_and_the_reader_is_restored() -> None:
    with i18n.use_locale("en", "Mars/Olympus_Mons"):
        assert i18n.format_time(MOMENT) == "20:40"
    assert i18n.current_language() == i18n.DEFAULT_LANGUAGE
    assert not i18n.is_timezone("Mars/Olympus_Mons") and i18n.is_timezone("Europe/Rome")


def test_italian_has_two_plural_forms_in_every_catalogue_file() -> None:
    for path in i18n.catalogue_files("it"):
        assert "Plural-Forms: nplurals=2; plural=(n != 1);" in path.read_text(), path.name
