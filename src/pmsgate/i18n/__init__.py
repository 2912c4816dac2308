"""What people read, in their language and time zone: Babel catalogues and formats.

Every sentence a customer reads — console pages, sign-in pages, e-mails, notices — is
written in English in the code (a template's ``{% trans %}``, Python's :func:`gettext`)
and translated through the GNU gettext catalogues under ``i18n/locales/<language>/
LC_MESSAGES/*.po`` (Babel reads them at first use; English needs none). Dates and times
are formatted by Babel's CLDR data in the reader's locale and time zone.

The language and time zone of the code that runs now live in a context variable:

- a web request gets them from :mod:`pmsgate.web.locale` (the language switch, the
  customer's setting, the browser's ``Accept-Language``, then Italian);
- a message sent in the background wraps its rendering in :func:`use_locale`.

Module-level words (a dict of phrases) are marked with :func:`N_` so the extractor sees
them, and translated where they are used with :func:`gettext`.

The register in Italian is the informal ``tu`` everywhere (``docs/i18n.md``).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Literal, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from babel import Locale, dates, numbers
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import NullTranslations, Translations

Language = Literal["it", "en"]
LANGUAGES: tuple[Language, ...] = ("it", "en")
DEFAULT_LANGUAGE: Language = "it"
DEFAULT_TIMEZONE = "Europe/Rome"
LOCALES_DIR = Path(__file__).parent / "locales"
LANGUAGE_NAMES: dict[Language, str] = {"it": "Italiano", "en": "English"}


@dataclass(frozen=True)
class Reader:
    """Who reads what is being rendered now: a language and a time zone."""

    language: Language = DEFAULT_LANGUAGE
    timezone: str = DEFAULT_TIMEZONE
    # "Now" for relative times ("3 ore fa"): the injected clock's, set with the reader.
    now: datetime | None = None

    @property
    def zone(self) -> ZoneInfo:
        """The time zone (Europe/Rome when the name is unknown)."""
        return zone_of(self.timezone)


_DEFAULT_READER = Reader()
_reader: ContextVar[Reader | None] = ContextVar("pmsgate_reader", default=None)


def language_of(value: str | None, default: Language = DEFAULT_LANGUAGE) -> Language:
    """A supported language for a setting such as ``it``, ``it-IT``, ``en_GB`` or ``Italian``."""
    text = (value or "").strip().lower().replace("_", "-")
    if text.startswith(("it", "ital")):
        return "it"
    if text.startswith(("en", "engl")):
        return "en"
    return default


@lru_cache(maxsize=64)
def zone_of(name: str | None) -> ZoneInfo:
    """The IANA time zone ``name``; Europe/Rome when it is empty or unknown."""
    try:
        return ZoneInfo((name or "").strip() or DEFAULT_TIMEZONE)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo(DEFAULT_TIMEZONE)


def is_timezone(name: str) -> bool:
    """Whether ``name`` is an IANA time zone this machine knows (e.g. ``Europe/Rome``)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def reader() -> Reader:
    """The reader of what is rendered now."""
    return _reader.get() or _DEFAULT_READER


def current_language() -> Language:
    """The language of what is rendered now."""
    return reader().language


def set_reader(value: Reader) -> None:
    """Make ``value`` the reader for the rest of this task (a web request)."""
    _reader.set(value)


@contextmanager
def use_locale(
    language: str | None, timezone: str | None = None, now: datetime | None = None
) -> Iterator[Reader]:
    """Render in ``language`` and ``timezone`` inside the block (e-mails, notices, tests)."""
    value = Reader(language_of(language), (timezone or "").strip() or DEFAULT_TIMEZONE, now)
    token = _reader.set(value)
    try:
        yield value
    finally:
        _reader.reset(token)


# --- catalogues ---------------------------------------------------------------------------------


def catalogue_files(language: str) -> list[Path]:
    """The ``.po`` files of a language, in a stable order."""
    return sorted((LOCALES_DIR / language / "LC_MESSAGES").glob("*.po"))


@lru_cache(maxsize=len(LANGUAGES))
def translations(language: Language) -> NullTranslations:
    """The language's messages, read from its ``.po`` files and compiled in memory.

    English is the language the code is written in: it has no catalogue to read.
    Fuzzy (unchecked) entries are left out, so their English shows instead.
    """
    merged: NullTranslations | None = None
    for path in catalogue_files(language):
        with path.open("rb") as source:
            catalogue = read_po(source, locale=language)
        buffer = io.BytesIO()
        write_mo(buffer, catalogue, use_fuzzy=False)
        buffer.seek(0)
        loaded = Translations(fp=buffer)
        if merged is None:
            merged = loaded
        else:
            cast(Translations, merged).merge(loaded)
    return merged if merged is not None else NullTranslations()


def gettext(message: str) -> str:
    """``message`` in the reader's language."""
    return translations(current_language()).gettext(message)


def ngettext(singular: str, plural: str, count: int) -> str:
    """The singular or plural form for ``count``, in the reader's language."""
    return translations(current_language()).ngettext(singular, plural, count)


def N_(message: str) -> str:
    """Mark ``message`` for translation without translating it now (translate at use)."""
    return message


# --- dates and times ----------------------------------------------------------------------------


def locale() -> Locale:
    """The Babel locale of the reader (``it_IT``, ``en_GB``)."""
    return _babel_locale(current_language())


@lru_cache(maxsize=len(LANGUAGES))
def _babel_locale(language: Language) -> Locale:
    # British English: day-month order and the 24-hour clock, as in the rest of Europe.
    return Locale.parse("it_IT" if language == "it" else "en_GB")


def local(moment: datetime) -> datetime:
    """``moment`` in the reader's time zone (a naive one is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(reader().zone)


def format_datetime(moment: datetime | None, style: str = "medium") -> str:
    """``26 nov 2026, 20:40`` / ``26 Nov 2026, 20:40``: the reader's zone and locale."""
    if moment is None:
        return ""
    when = local(moment)
    date_part = dates.format_date(when, "medium" if style == "medium" else style, locale())
    return f"{date_part}, {dates.format_time(when, 'HH:mm', locale=locale())}"


def format_date(value: date | datetime | None, style: str = "long") -> str:
    """``26 novembre 2026`` / ``26 November 2026`` (a datetime: its local date)."""
    if value is None:
        return ""
    day = local(value).date() if isinstance(value, datetime) else value
    return dates.format_date(day, style, locale=locale())


def format_time(moment: datetime | None) -> str:
    """``20:40``: the reader's local time of day."""
    if moment is None:
        return ""
    return dates.format_time(local(moment), "HH:mm", locale=locale())


def format_ago(moment: datetime | None, now: datetime | None = None) -> str:
    """``3 ore fa`` / ``3 hours ago`` (``now``: given, else the reader's, else the wall clock)."""
    if moment is None:
        return ""
    now = now or reader().now or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - now
    if abs(delta) < timedelta(minutes=1):
        return gettext("just now")
    return dates.format_timedelta(
        delta, add_direction=True, locale=locale(), threshold=1.0, granularity="minute"
    )


def format_number(value: float) -> str:
    """``1.234`` / ``1,234``: a number in the reader's locale."""
    return numbers.format_decimal(value, locale=locale())


def timezone_label() -> str:
    """The reader's time zone as people read it (``ora di Roma`` / ``Rome time``)."""
    return dates.get_timezone_location(reader().zone, locale=locale(), return_city=True)
