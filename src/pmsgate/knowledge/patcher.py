"""The template patcher: what makes a notes page canonical (docs/requirements.md R16.4, R16.5).

:func:`plan_patch` is pure: from a page's block tree and its :class:`PageCheck` it
lists the changes, each with a human description in which the WiFi password is
masked. :func:`apply_patch` makes them through the notes client, one write each
(the append may take more requests when it is split to the API's limits).

What a plan contains, in the order it is applied:

1. **rename_first_toggle** — the page's first toggle mentions wifi in its children
   but is not a canonical section (typically a welcome toggle): its title gets
   ``— informazioni generali / general information`` (words wifi/internet in the
   title itself are dropped), so no matcher, ours or a naive one that looks at the
   first toggle, reads it as the WiFi section. The qualifier marks it as done.
2. **set_wifi_title** — the WiFi section's title does not contain the network and
   the password: it becomes ``<its label> — Rete / Network: <network> · Password:
   <password>`` (the label is the title without any credentials already in it, e.g.
   ``📶 Wi-Fi e Internet``). The title is checked to read back as WiFi with exactly
   these credentials (values with spaces or separators are quoted), so the next
   check finds them there.
3. **reword_callout** — a callout inside the WiFi section says wifi or internet: the
   words are replaced by neutral ones in the callout's language (``il wifi`` → ``la
   rete``, ``internet`` → ``connessione``, ``the wifi`` → ``the network``,
   ``internet`` → ``connection``; "WiFi connection" → "connection"), keeping the
   rest of the text, its styling and links, and never touching the network name or
   the password when a callout quotes them.
4. **append_sections** — sections are missing: the catalogue's canonical blocks of
   the MISSING sections are appended at the end of the page (heading_2 + paragraphs,
   placeholders filled). The runbook says "append the 23 canonical blocks";
   a page without any section gets exactly those 23, but on a page that has some
   sections the full 23 would duplicate them (two "House rules", one of them
   generic), so only the missing sections' blocks are appended. The appended WiFi
   heading already carries the credentials in its text (rule 2), so the page is
   canonical after one apply.

**WiFi credentials.** Given ones (``--wifi-network``/``--wifi-password``) win over
the page's; otherwise the page's (title first, then body). When they are needed —
the WiFi section is missing or its title lacks them — and unknown, the plan holds
a ``wifi_credentials_unknown`` blocker and no WiFi change: nothing is invented.
Other changes are still planned.

**Idempotent.** A plan only holds what the check still finds wrong, and every change
makes that finding go away; after :func:`apply_patch`, a new check and plan of the
page are empty, so a second apply writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from pmsgate.catalogue import KnowledgeTemplate, load_catalogue
from pmsgate.integrations.notion.builders import rich_text
from pmsgate.integrations.notion.client import NotionClient
from pmsgate.integrations.notion.errors import NotionError
from pmsgate.integrations.notion.models import Block
from pmsgate.knowledge.template import (
    CALLOUT_WORDS,
    GENERAL_QUALIFIER,
    HEADINGS,
    SEPARATORS,
    WIFI,
    PageCheck,
    WifiCredentials,
    extract_wifi,
    mask,
    masked,
    protect_credentials,
    restore_credentials,
    section_of_title,
    title_label,
)

log = structlog.get_logger(__name__)

ChangeKind = Literal["rename_first_toggle", "set_wifi_title", "reword_callout", "append_sections"]
_ORDER: dict[str, int] = {
    "rename_first_toggle": 0,
    "set_wifi_title": 1,
    "reword_callout": 2,
    "append_sections": 3,
}
WIFI_TITLE_SEPARATOR = " — "
NETWORK_LABEL = "Rete / Network"
PASSWORD_LABEL = "Password"


@dataclass(frozen=True)
class Change:
    """One write the patcher makes; ``payload`` (which may hold the password) is never shown."""

    kind: ChangeKind
    block_id: str
    description: str
    block_type: str | None = None
    sections: tuple[str, ...] = ()
    payload: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @classmethod
    def on_block(
        cls, kind: ChangeKind, block: Block, description: str, payload: list[dict[str, Any]]
    ) -> Change:
        """A change of one block (its id and type), writing ``payload``."""
        return cls(kind, block.id, description, block_type=block.type, payload=payload)

    def report(self) -> dict[str, Any]:
        """A JSON-ready view (no payload)."""
        view: dict[str, Any] = {
            "kind": self.kind,
            "block_id": self.block_id,
            "description": self.description,
        }
        if self.sections:
            view["sections"] = list(self.sections)
        return view


@dataclass(frozen=True)
class Blocker:
    """Something the patcher must not do by itself; a person has to supply what is missing."""

    code: str
    description: str

    def report(self) -> dict[str, str]:
        """A JSON-ready view."""
        return {"code": self.code, "description": self.description}


@dataclass(frozen=True)
class PatchPlan:
    """The changes that make one page canonical, and what blocks the rest."""

    page_id: str
    changes: list[Change]
    blockers: list[Blocker] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing to write (blockers aside)."""
        return not self.changes

    def report(self) -> dict[str, Any]:
        """A JSON-ready view; the password never appears in it."""
        return {
            "page_id": self.page_id,
            "changes": [c.report() for c in self.changes],
            "blockers": [b.report() for b in self.blockers],
            "notes": list(self.notes),
        }


@dataclass
class PatchOutcome:
    """What :func:`apply_patch` did: the changes made and, if one failed, which and why."""

    page_id: str
    applied: list[Change] = field(default_factory=list)
    failed: Change | None = None
    error: NotionError | None = None
    requests: int = 0

    @property
    def ok(self) -> bool:
        """Every planned change was made."""
        return self.failed is None

    def report(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "page_id": self.page_id,
            "applied": [c.report() for c in self.applied],
            "failed": None if self.failed is None else self.failed.report(),
            "error": None if self.error is None else self.error.code,
            "requests": self.requests,
        }


# --- planning ----------------------------------------------------------------------------------


def plan_patch(
    page_id: str,
    blocks: Sequence[Block],
    check: PageCheck,
    *,
    wifi: WifiCredentials | None = None,
    template: KnowledgeTemplate | None = None,
) -> PatchPlan:
    """The changes that make the page canonical (pure: nothing is read or written)."""
    template = template or load_catalogue().knowledge
    by_id = {b.id: b for top in blocks for b in top.walk()}
    changes: list[Change] = []
    blockers: list[Blocker] = []
    notes: list[str] = []

    credentials = wifi or check.wifi
    if wifi is not None and check.wifi is not None and _differ(wifi, check.wifi):
        notes.append(
            "the WiFi credentials given differ from the page's; the title will carry the given "
            "ones (the rest of the page is not changed)"
        )
    wifi_match = check.sections.get(WIFI)
    wifi_block = by_id.get(wifi_match.block_id) if wifi_match is not None else None
    needs_credentials = WIFI in check.missing or (
        wifi_block is not None and not _title_carries(wifi_block.plain_text, credentials)
    )
    if needs_credentials and credentials is None:
        blockers.append(
            Blocker(
                "wifi_credentials_unknown",
                "the WiFi network and password are not on the page: give them with "
                "--wifi-network and --wifi-password(-stdin) to "
                + ("add the WiFi section" if wifi_block is None else "complete the WiFi title"),
            )
        )

    if check.misleading_first_toggle and check.misleading_first_toggle in by_id:
        changes.append(
            _rename_first_toggle(by_id[check.misleading_first_toggle], credentials, template)
        )

    if (
        wifi_block is not None
        and credentials is not None
        and not _title_carries(wifi_block.plain_text, credentials)
    ):
        title = wifi_title(title_label(wifi_block.plain_text), credentials, template)
        if title is None:
            blockers.append(_unreadable_title())
        else:
            changes.append(
                Change.on_block(
                    "set_wifi_title",
                    wifi_block,
                    f"set the WiFi title to {_masked(title, credentials)!r}",
                    rich_text(title),
                )
            )

    if wifi_block is not None:
        for callout in _wifi_callouts(blocks, check):
            changes.append(_reword_callout(callout, credentials))

    appendable = [s for s in check.missing if s != WIFI or credentials is not None]
    if appendable:
        change = _append_sections(page_id, appendable, credentials, template)
        if change is None:
            blockers.append(_unreadable_title())
        else:
            changes.append(change)

    changes.sort(key=lambda c: _ORDER[c.kind])
    return PatchPlan(page_id=page_id, changes=changes, blockers=blockers, notes=notes)


def wifi_title(
    label: str, wifi: WifiCredentials, template: KnowledgeTemplate | None = None
) -> str | None:
    """The WiFi section's title with network and password, or None if it would not read back."""
    template = template or load_catalogue().knowledge
    password = wifi.password.get_secret_value()
    # The page's own label first; plain "WiFi" when that label no longer names the section.
    for name in dict.fromkeys([label.strip() or "WiFi", "WiFi"]):
        for quote in ("", '"'):
            title = (
                f"{name}{WIFI_TITLE_SEPARATOR}{NETWORK_LABEL}: {quote}{wifi.network}{quote} · "
                f"{PASSWORD_LABEL}: {quote}{password}{quote}"
            )
            network, read_password, _ = extract_wifi([title], title=True)
            if (network, read_password) == (wifi.network, password) and (
                section_of_title(title, template) == WIFI
            ):
                return title
    return None


def reword_callout_text(text: str) -> str:
    """A callout's text without the words wifi/internet, in readable Italian or English."""
    # Bilingual texts are "italiano / English": each half is reworded in its own language.
    parts = re.split(r"(\s/\s)", text)
    return "".join(p if i % 2 else _reword_segment(p) for i, p in enumerate(parts))


# --- applying ----------------------------------------------------------------------------------


async def apply_patch(notes: NotionClient, plan: PatchPlan) -> PatchOutcome:
    """Make the plan's changes in order; stops at the first failure and says which."""
    outcome = PatchOutcome(page_id=plan.page_id)
    before = notes.requests_sent
    for change in plan.changes:
        try:
            if change.kind == "append_sections":
                await notes.append_blocks(change.block_id, change.payload)
            else:
                assert change.block_type is not None
                await notes.update_block(
                    change.block_id, change.block_type, {"rich_text": change.payload}
                )
        except NotionError as error:
            outcome.failed, outcome.error = change, error
            log.warning(
                "knowledge_patch_failed",
                page_id=plan.page_id,
                change=change.kind,
                block_id=change.block_id,
                code=error.code,
            )
            break
        outcome.applied.append(change)
        # The description, never the payload: the payload may hold the WiFi password.
        log.info(
            "knowledge_patch_applied",
            page_id=plan.page_id,
            change=change.kind,
            block_id=change.block_id,
        )
    outcome.requests = notes.requests_sent - before
    return outcome


# --- internals ---------------------------------------------------------------------------------


def _differ(a: WifiCredentials, b: WifiCredentials) -> bool:
    return a.network != b.network or a.password.get_secret_value() != b.password.get_secret_value()


def _title_carries(title: str, wifi: WifiCredentials | None) -> bool:
    if wifi is None:
        return False
    network, password, _ = extract_wifi([title], title=True)
    return (network, password) == (wifi.network, wifi.password.get_secret_value())


def _masked(text: str, wifi: WifiCredentials | None) -> str:
    return masked(text, wifi.password if wifi is not None else None)


def _unreadable_title() -> Blocker:
    return Blocker(
        "wifi_title_unreadable",
        "the WiFi network or password contains characters that do not read back from a title "
        "(e.g. a double quote together with spaces); set the WiFi title by hand",
    )


def _rename_first_toggle(
    block: Block, wifi: WifiCredentials | None, template: KnowledgeTemplate
) -> Change:
    base = " ".join(CALLOUT_WORDS.sub(" ", block.plain_text).split()).strip(SEPARATORS)
    title = f"{base}{WIFI_TITLE_SEPARATOR}{GENERAL_QUALIFIER}" if base else GENERAL_QUALIFIER
    if section_of_title(title, template) == WIFI:
        title = GENERAL_QUALIFIER
    return Change.on_block(
        "rename_first_toggle",
        block,
        f"rename the first toggle {_masked(block.plain_text, wifi)!r} to "
        f"{_masked(title, wifi)!r}: its children mention wifi, but it is not the WiFi section",
        rich_text(title),
    )


def _wifi_callouts(blocks: Sequence[Block], check: PageCheck) -> Iterator[Block]:
    wanted = set(check.wifi_callouts)
    for top in blocks:
        for block in top.walk():
            if block.id in wanted:
                wanted.discard(block.id)
                yield block


def _reword_callout(block: Block, wifi: WifiCredentials | None) -> Change:
    items: list[dict[str, Any]] = []
    for item in block.rich_text:
        protected, swaps = protect_credentials(item.plain_text, wifi)
        reworded = restore_credentials(reword_callout_text(protected), swaps)
        items.append(item.model_copy(update={"plain_text": reworded}).to_request())
    new_text = "".join(i["text"]["content"] for i in items)
    return Change.on_block(
        "reword_callout",
        block,
        f"reword the callout {_masked(block.plain_text, wifi)!r} inside the WiFi section to "
        f"{_masked(new_text, wifi)!r}",
        items,
    )


def _append_sections(
    page_id: str,
    sections: Sequence[str],
    wifi: WifiCredentials | None,
    template: KnowledgeTemplate,
) -> Change | None:
    values = {
        "wifi_network": wifi.network if wifi else "",
        "wifi_password": wifi.password.get_secret_value() if wifi else "",
    }
    payload: list[dict[str, Any]] = []
    wanted = [s for s in template.section_ids() if s in sections]
    for block in template.blocks:
        if block.section not in wanted:
            continue
        rendered = block.render(values)
        if block.section == WIFI and block.type in HEADINGS and wifi is not None:
            # The appended WiFi heading must already carry the credentials (rule 2).
            title = wifi_title(block.text, wifi, template)
            if title is None:
                return None
            rendered = {**rendered, block.type: {"rich_text": rich_text(title)}}
        payload.append(rendered)
    description = f"append {len(payload)} canonical blocks for the missing sections: " + ", ".join(
        wanted
    )
    if WIFI in wanted and wifi is not None:
        description += f" (WiFi network {wifi.network!r}, password {mask(wifi.password)})"
    return Change(
        kind="append_sections",
        block_id=page_id,
        description=description,
        sections=tuple(wanted),
        payload=payload,
    )


# Callout rewording: why a table here and not in the catalogue — these are not section
# titles but the two words of docs/requirements.md R16.5 and their neutral replacements.
_WORD = r"(?:wi[\s\-]?fi|internet)"
# Frequent short words of each language: enough to tell which one a callout is written in.
_ITALIAN_HINTS = frozenset(
    re.findall(
        r"\S+",
        "il lo la le gli i del della dei delle al alla nel nella sul sulla dal dalla con per "
        "non se è e di da in un una che anche fino ideale spegni riaccendi arriva funziona",
    )
)
_ENGLISH_HINTS = frozenset(
    re.findall(
        r"\S+",
        "the a an of to in on for with and or is are does not if it up good works reaches "
        "switch off again too",
    )
)
_ITALIAN_ARTICLES = {
    "il": "la rete",
    "lo": "la rete",
    "del": "della rete",
    "dello": "della rete",
    "al": "alla rete",
    "allo": "alla rete",
    "dal": "dalla rete",
    "nel": "nella rete",
    "sul": "sulla rete",
    "col": "con la rete",
}
_REPLACEMENTS = {
    "it": {"wifi": "rete", "internet": "connessione"},
    "en": {"wifi": "network", "internet": "connection"},
}


def _reword_segment(text: str) -> str:
    words = re.findall(r"[a-zà-ÿ']+", text.casefold())
    italian = sum(w in _ITALIAN_HINTS for w in words)
    english = sum(w in _ENGLISH_HINTS for w in words)
    lang = "it" if italian >= english else "en"
    flags = re.IGNORECASE
    # "connessione wifi" / "wifi connection": the noun alone says it.
    text = re.sub(rf"\b(connessione|rete|linea|collegamento)\s+{_WORD}\b", r"\1", text, flags=flags)
    text = re.sub(rf"\b{_WORD}\s+(connection|network|access|line)\b", r"\1", text, flags=flags)
    if lang == "it":
        text = re.sub(
            rf"\b({'|'.join(_ITALIAN_ARTICLES)})\s+{_WORD}\b",
            lambda m: _same_case(m.group(0), _ITALIAN_ARTICLES[m.group(1).casefold()]),
            text,
            flags=flags,
        )
        text = re.sub(
            rf"\bl'\s*{_WORD}\b", lambda m: _same_case(m.group(0), "la rete"), text, flags=flags
        )
    else:
        text = re.sub(
            rf"\bthe\s+{_WORD}\b",
            lambda m: _same_case(m.group(0), "the network"),
            text,
            flags=flags,
        )
    return CALLOUT_WORDS.sub(
        lambda m: _same_case(
            m.group(0),
            _REPLACEMENTS[lang]["internet" if m.group(0).casefold() == "internet" else "wifi"],
        ),
        text,
    )


def _same_case(original: str, replacement: str) -> str:
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement
