"""The catalogue lint: nothing that looks like personal data or a code reaches a workspace.

docs/requirements.md R6.3: every tool parameter carries a description in words, and no
description, example, skill, guardrail or instruction contains a real-looking
name, phone number, e-mail address or code. The rules are data
(``lint_rules.yaml``, always the installed package's copy); this module turns
them into matchers and walks every text of a catalogue.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Literal

import phonenumbers
import yaml
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from pmsgate.catalogue.loader import Catalogue

LintKind = Literal[
    "invalid",
    "missing_description",
    "email",
    "phone",
    "person_name",
    "access_code",
    "booking_code",
    "secret",
]

_EXCERPT_CONTEXT = 25
# A capitalised word (apostrophes allowed, straight or typographic: "D'Angelo").
_SURNAME = r"[A-ZÀ-Ý][A-Za-zÀ-ÿ'\u2019]+"


@dataclass(frozen=True)
class LintProblem:
    """One problem: where it is (file and field), what kind, and the text around it."""

    where: str
    kind: LintKind
    excerpt: str


class LintRules(BaseModel):
    """The shape of ``lint_rules.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    phone_regions: tuple[str, ...] = Field(min_length=1)
    min_description_words: int = Field(ge=1)
    honorifics: tuple[str, ...] = Field(min_length=1)
    given_names: tuple[str, ...] = Field(min_length=1)
    code_words: tuple[str, ...] = Field(min_length=1)
    booking_prefixes: tuple[str, ...] = Field(min_length=1)


@dataclass(frozen=True)
class _Matchers:
    email: re.Pattern[str]
    honorific_name: re.Pattern[str]
    given_and_surname: re.Pattern[str]
    access_code: re.Pattern[str]
    booking_prefixed: re.Pattern[str]
    long_digits: re.Pattern[str]
    secret: re.Pattern[str]
    token: re.Pattern[str]


def _alternatives(words: tuple[str, ...]) -> str:
    # Longest first, so "cassetta di sicurezza" wins over "cassetta"; spaces match any blank.
    ordered = sorted(set(words), key=len, reverse=True)
    return "|".join(r"\s+".join(re.escape(part) for part in w.split()) for w in ordered)


@lru_cache(maxsize=1)
def load_lint_rules() -> LintRules:
    """The installed package's lint rules."""
    text = resources.files("pmsgate.catalogue").joinpath("lint_rules.yaml").read_text("utf-8")
    return LintRules.model_validate(yaml.safe_load(text))


@lru_cache(maxsize=4)
def _matchers(rules: LintRules) -> _Matchers:
    return _Matchers(
        email=re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
        honorific_name=re.compile(
            rf"(?<![\w.])(?:{_alternatives(rules.honorifics)})\.?\s+{_SURNAME}"
        ),
        given_and_surname=re.compile(
            rf"\b(?:{_alternatives(rules.given_names)})\s+{_SURNAME}(?![\w-])"
        ),
        # The first run of digits within a few words after a code word; never a date.
        access_code=re.compile(
            rf"(?i:\b(?:{_alternatives(rules.code_words)})\b)[^\d\n]{{0,30}}?"
            r"(?<![\d])\d{4,}(?![\d])(?![-/.]\d)"
        ),
        booking_prefixed=re.compile(
            rf"\b(?:{_alternatives(rules.booking_prefixes)})[-_ ]?(?=[A-Z0-9]*\d)[A-Z0-9]{{5,}}\b"
        ),
        long_digits=re.compile(r"(?<![\d.,])\d{8,}(?![\d])"),
        secret=re.compile(r"\bpgw_[A-Za-z0-9_-]{8,}|\b[0-9a-fA-F]{32,}\b"),
        token=re.compile(r"(?<![\w-])[A-Za-z0-9_-]{24,}(?![\w-])"),
    )


def _excerpt(text: str, start: int, end: int) -> str:
    low, high = max(0, start - _EXCERPT_CONTEXT), min(len(text), end + _EXCERPT_CONTEXT)
    snippet = " ".join(text[low:high].split())
    return ("…" if low else "") + snippet + ("…" if high < len(text) else "")


def lint_text(text: str, rules: LintRules | None = None) -> list[tuple[LintKind, str]]:
    """Every personal-data or code finding in one text, as (kind, excerpt)."""
    rules = rules or load_lint_rules()
    m = _matchers(rules)
    # Most specific kind first; a span already reported is not reported again as another kind.
    candidates: list[tuple[LintKind, int, int]] = []
    candidates += [("email", x.start(), x.end()) for x in m.email.finditer(text)]
    candidates += [("secret", x.start(), x.end()) for x in m.secret.finditer(text)]
    candidates += [
        ("secret", x.start(), x.end())
        for x in m.token.finditer(text)
        # Letters and digits mixed: a key or password, not a long kebab-case name.
        if re.search(r"\d", x.group()) and re.search(r"[A-Za-z]", x.group())
    ]
    for region in rules.phone_regions:
        candidates += [
            ("phone", x.start, x.end) for x in phonenumbers.PhoneNumberMatcher(text, region)
        ]
    for pattern in (m.honorific_name, m.given_and_surname):
        candidates += [("person_name", x.start(), x.end()) for x in pattern.finditer(text)]
    for pattern in (m.booking_prefixed, m.long_digits):
        candidates += [("booking_code", x.start(), x.end()) for x in pattern.finditer(text)]
    for x in m.access_code.finditer(text):
        digits = re.search(r"\d{4,}", x.group())
        start = x.start() + (digits.start() if digits else 0)
        candidates.append(("access_code", start, x.end()))
    accepted: list[tuple[LintKind, int, int]] = []
    for kind, start, end in candidates:
        if not any(start < e and s < end for _, s, e in accepted):
            accepted.append((kind, start, end))
    accepted.sort(key=lambda f: f[1])
    return [(kind, _excerpt(text, start, end)) for kind, start, end in accepted]


def catalogue_texts(catalogue: Catalogue) -> Iterator[tuple[str, str]]:
    """Every text the catalogue sends to the assistant platform, as (where, text)."""
    for name, tool in catalogue.tools.items():
        yield f"tools.yaml: tools.{name}.description", tool.description
        yield (
            f"tools.yaml: tools.{name}.execution_message_description",
            tool.execution_message_description,
        )
        for parameter, definition in tool.parameters.items():
            yield (
                f"tools.yaml: tools.{name}.parameters.{parameter}.description",
                (definition.description),
            )
    for name, skill in catalogue.skills.items():
        yield f"skills.yaml: skills.{name}.display_name", skill.display_name
        yield f"skills.yaml: skills.{name}.description", skill.description
        yield f"skills.yaml: skills.{name}.body", skill.body
        yield f"skills.yaml: skills.{name}.tags", " ".join(skill.tags)
    for guardrail in catalogue.guardrails:
        yield f"guardrails.yaml: {guardrail.id}.title", guardrail.title
        yield f"guardrails.yaml: {guardrail.id}.knowledge", guardrail.knowledge
    agent = catalogue.agent
    yield "agent.yaml: name", agent.name
    yield "agent.yaml: description", agent.description
    yield "agent.yaml: instructions", agent.instructions
    for index, trigger in enumerate(agent.triggers):
        yield f"agent.yaml: triggers[{index}].name", trigger.name
    for section in catalogue.knowledge.sections:
        for index, title in enumerate(section.titles):
            yield f"knowledge.yaml: sections.{section.id}.titles[{index}]", title
    for index, block in enumerate(catalogue.knowledge.blocks):
        yield f"knowledge.yaml: blocks[{index}].text", block.text


def lint_catalogue(catalogue: Catalogue, rules: LintRules | None = None) -> list[LintProblem]:
    """Every lint problem of a catalogue: undocumented parameters and personal data."""
    rules = rules or load_lint_rules()
    problems: list[LintProblem] = []
    for name, tool in catalogue.tools.items():
        for parameter, definition in tool.parameters.items():
            words = definition.description.split()
            if len(words) < rules.min_description_words:
                problems.append(
                    LintProblem(
                        f"tools.yaml: tools.{name}.parameters.{parameter}.description",
                        "missing_description",
                        definition.description or "(empty)",
                    )
                )
    for where, text in catalogue_texts(catalogue):
        problems += [LintProblem(where, kind, excerpt) for kind, excerpt in lint_text(text, rules)]
    return problems
