"""The translation checks' helpers: extract what the code asks to translate, read templates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from pmsgate.i18n import catalogue_files

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None}


def extracted() -> Iterator[tuple[str, str | tuple[str, ...], int]]:
    """(file, msgid, line) of every message the code and templates ask to translate."""
    with (ROOT / "babel.cfg").open() as config:
        method_map, options_map = parse_mapping_cfg(config)
    for filename, line, message, _comments, _context in extract_from_dir(
        str(ROOT), method_map, options_map, keywords=KEYWORDS
    ):
        yield filename, message, line


def catalogue(language: str) -> Catalog:
    """The union of a language's .po files."""
    union = Catalog(locale=language)
    for path in catalogue_files(language):
        with path.open("rb") as source:
            for message in read_po(source, locale=language):
                if message.id:
                    union[message.id] = message
    return union
