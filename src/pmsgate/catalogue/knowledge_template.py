"""The knowledge template (``knowledge.yaml``): five canonical sections, 23 canonical blocks."""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SECTION_COUNT = 5  # docs/requirements.md R16.1
BLOCK_COUNT = 23  # docs/requirements.md R16.4
PLACEHOLDERS = ("wifi_network", "wifi_password")
# The notes workspace refuses a rich-text content longer than this (docs/knowledge-sync.md).
RICH_TEXT_MAX = 2000
# What a placeholder may become: one line, short enough to keep every block under the limit.
_VALUE_MAX = 200


def normalise_title(title: str) -> str:
    """A title reduced for matching: no accents, emoji or punctuation, lower case, one space."""
    decomposed = unicodedata.normalize("NFKD", title)
    letters = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(re.sub(r"[^0-9a-z]+", " ", letters.casefold()).split())


class Section(BaseModel):
    """A canonical section every apartment's notes page must contain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Literal["wifi", "checkin_checkout", "how_to_reach", "house_rules", "before_departure"]
    title_it: str = Field(min_length=2)
    title_en: str = Field(min_length=2)
    variants: list[str] = Field(default_factory=list)

    @property
    def titles(self) -> list[str]:
        """Every accepted title: the canonical ones first, then the variants."""
        return list(dict.fromkeys([self.title_it, self.title_en, *self.variants]))

    def match_length(self, title: str) -> int:
        """How long the longest of this section's titles found in ``title`` is (0: none)."""
        padded = f" {normalise_title(title)} "
        found = [
            len(name)
            for name in (normalise_title(t) for t in self.titles)
            if name and f" {name} " in padded
        ]
        return max(found, default=0)


class Block(BaseModel):
    """One canonical block, appended when a page lacks sections."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    section: str
    type: Literal["heading_2", "paragraph"]
    text: str = Field(min_length=1, max_length=RICH_TEXT_MAX - 2 * _VALUE_MAX)

    @model_validator(mode="after")
    def _only_known_placeholders(self) -> Block:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(self.text) if f is not None]
        except ValueError as error:
            raise ValueError(f"unbalanced braces in {self.text!r}: {error}") from None
        unknown = [f for f in fields if f not in PLACEHOLDERS]
        if unknown:
            raise ValueError(
                f"unknown placeholders {unknown}; allowed: {', '.join(PLACEHOLDERS)} "
                "(write literal braces as {{ and }})"
            )
        return self

    def render(self, values: dict[str, str]) -> dict[str, Any]:
        """This block as Notion block JSON, placeholders filled."""
        content = self.text.format_map(values)
        return {
            "object": "block",
            "type": self.type,
            self.type: {"rich_text": [{"type": "text", "text": {"content": content}}]},
        }


class KnowledgeTemplate(BaseModel):
    """The shape of ``knowledge.yaml``: the sections and the blocks that supply them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sections: list[Section]
    blocks: list[Block]

    @model_validator(mode="after")
    def _spec_template(self) -> KnowledgeTemplate:
        ids = [s.id for s in self.sections]
        if len(ids) != SECTION_COUNT or len(set(ids)) != SECTION_COUNT:
            raise ValueError(f"exactly {SECTION_COUNT} distinct sections are required")
        if len(self.blocks) != BLOCK_COUNT:
            raise ValueError(
                f"exactly {BLOCK_COUNT} canonical blocks are required, found {len(self.blocks)}"
            )
        by_id = {s.id: s for s in self.sections}
        unknown = sorted({b.section for b in self.blocks} - set(by_id))
        if unknown:
            raise ValueError(f"blocks name unknown sections: {', '.join(unknown)}")
        for section in self.sections:
            # A title naming another section more precisely would never count as this one.
            shadowed = [t for t in section.titles if self.section_of(t) != section.id]
            if shadowed:
                raise ValueError(
                    f"titles of section {section.id!r} are taken by another section: {shadowed}"
                )
            own = [b for b in self.blocks if b.section == section.id]
            if not own or own[0].type != "heading_2" or self.section_of(own[0].text) != section.id:
                raise ValueError(
                    f"the blocks of section {section.id!r} must start with a heading_2 whose "
                    f"text names that section"
                )
        texts = " ".join(b.text for b in self.blocks if b.section == "wifi")
        missing = [p for p in PLACEHOLDERS if "{" + p + "}" not in texts]
        if missing:
            raise ValueError(f"the WiFi blocks must contain {', '.join(missing)}")
        return self

    def section_ids(self) -> list[str]:
        """The five section ids, in the template's order."""
        return [s.id for s in self.sections]

    def section_of(self, title: str) -> str | None:
        """The section a heading or toggle title names (longest matching title wins), or None."""
        # Longest wins, so "Istruzioni per il check-out" is before_departure, not
        # checkin_checkout, although it also contains the variant "check-out".
        best: tuple[int, str | None] = (0, None)
        for section in self.sections:
            length = section.match_length(title)
            if length > best[0]:
                best = (length, section.id)
        return best[1]
