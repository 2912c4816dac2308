"""The template check: a notes page's five canonical sections, found by their titles
(docs/requirements.md R16).

**Where sections are looked for.** Among the page's top-level blocks (layout
containers such as columns and synced blocks are see-through): a **toggle** is a
section when its title names one; a **heading** (``heading_1/2/3``) is a section
when its text names one, and its body is its children when it is a toggleable
heading, else the blocks that follow it up to the next heading of the same or a
higher level, or up to the next block that is itself a section. Nested toggles
belong to their parent's body and are never sections of their own.

**How a title names a section.** Through the catalogue (``knowledge.yaml``, the
only place the vocabulary lives): case, accents, emoji and punctuation are
ignored and one of the section's titles or variants must appear as whole words;
the longest match wins (:meth:`KnowledgeTemplate.section_of`). Bodies and callouts
are never matched: a welcome toggle whose children say "wifi" is not the WiFi
section, nor is a callout saying "internet". For a title that names WiFi, the
credential values written in it are ignored when matching, so a network called
"Casa-Location" cannot turn the WiFi toggle into a how-to-reach section.

**Several candidates for one section.** The one whose title, without the WiFi
credentials written in it, is exactly a canonical title (``title_it`` or
``title_en``) wins, else the first on the page; the others are reported in
``duplicates`` and in the notes.

**WiFi credentials** come from the WiFi section's title and body, each field
from the title first (the patcher makes the title the authoritative place;
docs/requirements.md R16.5), then from the body, then from the other WiFi candidates. Patterns,
one line at a time (case-insensitive):

- ``<label> <separator> <value>`` where a network label is ``Rete``, ``Rete WiFi``,
  ``Nome rete``, ``Network``, ``Network name``, ``WiFi network``, ``SSID``, ``Nome
  WiFi``, ``WiFi name``; a password label is ``Password``, ``Password WiFi``,
  ``WiFi password``, ``Passphrase``, ``PW``, ``PWD``, ``Pass``, ``Chiave``, ``Chiave
  WiFi``, ``Key``, ``WiFi key``, ``Codice WiFi``, ``WiFi code``; labels may be
  chained with slashes (``Rete / Network: X``) and followed by ``è``/``is``; the
  separator is ``:`` or ``=`` — optional in a title and at the start of a body
  line, required elsewhere in a body (so "the network is fast" is not a network).
- a network value runs to the next ``·``, ``|``, ``,``, ``;``, `` - ``, `` / ``,
  `` (``, sentence end or label, and may contain spaces (SSIDs often do); a
  password value is one word (quote it to keep spaces: ``Password: "a b c"``);
  surrounding quotes are removed, and so is a sentence's final ``.``, ``,`` or
  ``;``. Values that are themselves labels or the words wifi/internet are refused
  ("Password WiFi" is a title, not a password).
- in a title only: ``WiFi: <network> / <password>`` (also a hyphen, en or em dash
  after the label and ``|`` or ``·`` between the values).

**Complete and canonical.** A page is *complete* (docs/requirements.md R16.3; what the sync's
``incompleteTemplates`` counts) when the five sections are present and the WiFi
network and password are known. It is *canonical* when, in addition, nothing is
left for the patcher (docs/requirements.md R16.5): the WiFi title carries both credentials,
no callout inside the WiFi section says wifi or internet, and the page's first
toggle is a section, or does not mention wifi in its children, or has already been
renamed (its title holds :data:`GENERAL_QUALIFIER`).

The password is a ``SecretStr``: masked in ``repr``, in ``model_dump`` (section
titles included: a patched WiFi title holds it), in :meth:`PageCheck.report` and in
the notes; only ``SectionMatch.title`` read as an attribute still holds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    SerializerFunctionWrapHandler,
    computed_field,
    field_validator,
    model_serializer,
)

from pmsgate.catalogue import KnowledgeTemplate, load_catalogue, normalise_title
from pmsgate.integrations.notion.models import Block
from pmsgate.knowledge.nodes import top_level

WIFI = "wifi"
HEADINGS = {"heading_1": 1, "heading_2": 2, "heading_3": 3}

# The words docs/requirements.md R16.5 names: removed from the WiFi section's callouts.
CALLOUT_WORDS = re.compile(r"(?<![0-9a-z])(?:wi[\s\-]?fi|internet)(?![0-9a-z])", re.IGNORECASE)
# What makes a first toggle "mention wifi" (docs/requirements.md R16.5): the word wifi.
WIFI_WORD = re.compile(r"(?<![0-9a-z])wi[\s\-]?fi(?![0-9a-z])", re.IGNORECASE)

# What the patcher adds to a misleading first toggle's title (see pmsgate.knowledge.patcher);
# it names no section in either language, and marks the toggle as already renamed.
GENERAL_QUALIFIER = "informazioni generali / general information"

# Hyphen, en dash, em dash: people separate a title's parts with any of them.
DASHES = "-\u2013\u2014"
SEPARATORS = f"{DASHES}:·|/ "

_WIFI_ = r"wi[\s\-]?fi"
_NETWORK_LABEL = (
    rf"(?:nome\s+(?:della\s+)?rete(?:\s+{_WIFI_})?|rete(?:\s+{_WIFI_})?|{_WIFI_}\s+network"
    rf"|network(?:\s+name)?|ssid|nome\s+(?:del(?:la)?\s+)?{_WIFI_}|{_WIFI_}\s+name)"
)
_PASSWORD_LABEL = (
    rf"(?:password(?:\s+(?:del(?:la)?\s+)?{_WIFI_})?|{_WIFI_}\s+password|passphrase|pwd|pw"
    rf"|pass|chiave(?:\s+{_WIFI_})?|{_WIFI_}\s+key|key|codice\s+{_WIFI_}|{_WIFI_}\s+code)"
)
_LABEL = rf"(?:{_NETWORK_LABEL}|{_PASSWORD_LABEL})"
_NETWORK_ONLY = re.compile(rf"^{_NETWORK_LABEL}$", re.IGNORECASE)
_PASSWORD_ONLY = re.compile(rf"^{_PASSWORD_LABEL}$", re.IGNORECASE)
_END = rf"(?=\s*(?:[·|,;]|\.(?:\s|$)|\s[{DASHES}/]\s|\(|$)|\s+{_LABEL}(?![0-9a-z]))"
_FIELD = re.compile(
    rf"(?<![0-9a-z])(?P<label>{_LABEL}(?:\s*/\s*{_LABEL})*)(?![0-9a-z])"
    rf"(?:\s+(?:è|e'|is))?\s*(?P<sep>[:=])?\s*"
    rf"(?P<value>\"[^\"]+\"|“[^”]+”|«[^»]+»|'[^']+'|`[^`]+`|[^\s·|,;]+(?:[ \t]+[^\s·|,;:]+)*?)"
    rf"{_END}",
    re.IGNORECASE,
)
_COMPACT = re.compile(
    rf"^\W*(?:{_WIFI_}|internet|wlan|wireless)\s*(?:[{DASHES}:])\s*"
    rf"(?P<network>[^/|·]+?)\s*[/|·]\s*(?P<password>\S+)\s*$",
    re.IGNORECASE,
)
_QUOTES = {'"': '"', "“": "”", "«": "»", "'": "'", "`": "`"}
_REFUSED_VALUES = re.compile(
    rf"^(?:{_LABEL}|{_WIFI_}|internet|wlan|wireless|e|and|o|or|è|is)$", re.IGNORECASE
)
_LINE_START = re.compile(r"^[\W_]*$")


class WifiCredentials(BaseModel):
    """An apartment's WiFi: the network name and its password (a secret)."""

    model_config = ConfigDict(frozen=True)

    network: str = Field(min_length=1, max_length=200, pattern=r"^[^\n]*\S[^\n]*$")
    password: SecretStr = Field(min_length=1, max_length=200)

    @field_validator("password")
    @classmethod
    def _one_line(cls, value: SecretStr) -> SecretStr:
        secret = value.get_secret_value()
        if "\n" in secret or not secret.strip():
            raise ValueError("the password must be one non-blank line")
        return value

    def masked(self) -> str:
        """The credentials as printable text: the network, never the password."""
        return f"network {self.network!r}, password {mask(self.password)}"


def mask(_secret: SecretStr | str) -> str:
    """What is shown in place of a password, whatever its length."""
    return "********"


def masked(text: str, password: SecretStr | None) -> str:
    """The text with every occurrence of the password masked."""
    secret = password.get_secret_value() if password is not None else ""
    return text.replace(secret, mask(secret)) if secret else text


class SectionMatch(BaseModel):
    """Where a page holds one canonical section."""

    model_config = ConfigDict(frozen=True)

    block_id: str
    # The WiFi section's title holds the password once patched: kept out of repr.
    title: str = Field(repr=False)
    kind: str = Field(description="The block type: toggle, heading_1, heading_2 or heading_3.")
    exact: bool = Field(description="The title (WiFi credentials aside) is a canonical title.")
    body_block_ids: list[str] = Field(
        default_factory=list,
        description="A heading's body: the top-level blocks after it (empty for toggles, "
        "whose body is their children).",
    )


class PageCheck(BaseModel):
    """The outcome of checking one notes page against the knowledge template."""

    page_id: str | None = None
    sections: dict[str, SectionMatch | None]
    missing: list[str]
    wifi: WifiCredentials | None = None
    wifi_title_complete: bool = False
    wifi_callouts: list[str] = Field(
        default_factory=list,
        description="Callouts inside the WiFi section that say wifi or internet.",
    )
    misleading_first_toggle: str | None = Field(
        default=None,
        description="The first toggle, when its children mention wifi but it is not the "
        "WiFi section and has not been renamed yet.",
    )
    duplicates: dict[str, list[str]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _without_password(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A patched WiFi title holds the password: dumps show it masked, like the report.
        data: dict[str, Any] = handler(self)
        hide = self.wifi.password if self.wifi is not None else None
        for match in (data.get("sections") or {}).values():
            if isinstance(match, dict) and isinstance(match.get("title"), str):
                match["title"] = masked(match["title"], hide)
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        """Every canonical section is present and the WiFi network and password are known."""
        return not self.missing and self.wifi is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def canonical(self) -> bool:
        """Complete, and nothing left for the patcher to change (docs/requirements.md R16.5)."""
        return (
            self.complete
            and self.wifi_title_complete
            and not self.wifi_callouts
            and self.misleading_first_toggle is None
        )

    def report(self) -> dict[str, object]:
        """A JSON-ready view; the WiFi password is reported as found, never shown."""
        hide = self.wifi.password if self.wifi is not None else None
        return {
            "page_id": self.page_id,
            "complete": self.complete,
            "canonical": self.canonical,
            "missing": list(self.missing),
            "sections": {
                key: None
                if match is None
                else {
                    "block_id": match.block_id,
                    "title": masked(match.title, hide),
                    "kind": match.kind,
                    "exact": match.exact,
                }
                for key, match in self.sections.items()
            },
            "wifi": None
            if self.wifi is None
            else {"network": self.wifi.network, "password": "found"},
            "wifi_title_complete": self.wifi_title_complete,
            "wifi_callouts": list(self.wifi_callouts),
            "misleading_first_toggle": self.misleading_first_toggle,
            "duplicates": {k: list(v) for k, v in self.duplicates.items()},
            "notes": list(self.notes),
        }


# --- the check ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    section: str
    index: int
    block: Block
    exact: bool
    body: list[Block]


def check_page(
    blocks: Sequence[Block],
    template: KnowledgeTemplate | None = None,
    *,
    page_id: str | None = None,
) -> PageCheck:
    """Check a page's block tree (as ``NotionClient.read_tree`` returns it) against the template."""
    template = template or load_catalogue().knowledge
    top = list(top_level(blocks))
    candidates = _candidates(top, template)
    sections: dict[str, SectionMatch | None] = {}
    chosen: dict[str, _Candidate] = {}
    duplicates: dict[str, list[str]] = {}
    notes: list[str] = []
    for section_id in template.section_ids():
        found = [c for c in candidates if c.section == section_id]
        if not found:
            sections[section_id] = None
            continue
        # Deterministic: an exact canonical title first, else page order.
        best = min(found, key=lambda c: (not c.exact, c.index))
        chosen[section_id] = best
        sections[section_id] = SectionMatch(
            block_id=best.block.id,
            title=best.block.plain_text,
            kind=best.block.type,
            exact=best.exact,
            body_block_ids=[b.id for b in best.body] if best.block.type in HEADINGS else [],
        )
        others = [c for c in found if c is not best]
        if others:
            duplicates[section_id] = [c.block.id for c in others]
            notes.append(
                f"{len(found)} blocks are titled as section {section_id!r}; using "
                f"{best.block.plain_text!r} ({'exact canonical title' if best.exact else 'first'})"
            )
    missing = [s for s in template.section_ids() if sections[s] is None]

    wifi: WifiCredentials | None = None
    title_complete = False
    callouts: list[str] = []
    if WIFI in chosen:
        section = chosen[WIFI]
        others = [c for c in candidates if c.section == WIFI and c is not section]
        wifi, title_complete, wifi_notes = _wifi_of(section, others)
        notes += wifi_notes
        callouts = [
            b.id
            for b in _section_descendants(section)
            if b.type == "callout" and mentions_callout_words(b.plain_text, wifi)
        ]
    misleading = _misleading_first_toggle(top, chosen)
    if wifi is not None:
        # Notes quote titles, and a title may hold the password.
        notes = [masked(note, wifi.password) for note in notes]
    return PageCheck(
        page_id=page_id,
        sections=sections,
        missing=missing,
        wifi=wifi,
        wifi_title_complete=title_complete,
        wifi_callouts=callouts,
        misleading_first_toggle=misleading,
        duplicates=duplicates,
        notes=notes,
    )


def section_of_title(title: str, template: KnowledgeTemplate) -> str | None:
    """The section a toggle or heading title names, WiFi credentials in it aside, or None."""
    named = template.section_of(title)
    wifi = next(s for s in template.sections if s.id == WIFI)
    if wifi.match_length(title) == 0:
        return named
    # The values are the apartment's, not a title's words: match on the labels alone.
    return template.section_of(_without_credential_values(title)) or named


def is_exact_title(title: str, section_id: str, template: KnowledgeTemplate) -> bool:
    """Whether the title, WiFi credentials aside, is the section's canonical title."""
    section = next(s for s in template.sections if s.id == section_id)
    bare = normalise_title(_without_credentials(title)) if section_id == WIFI else None
    names = {normalise_title(section.title_it), normalise_title(section.title_en)}
    return normalise_title(title) in names or (bare is not None and bare in names)


def mentions_callout_words(text: str, wifi: WifiCredentials | None = None) -> bool:
    """Whether a text says wifi or internet outside the WiFi network name and password."""
    return bool(CALLOUT_WORDS.search(protect_credentials(text, wifi)[0]))


def protect_credentials(text: str, wifi: WifiCredentials | None) -> tuple[str, dict[str, str]]:
    """The text with the network and password swapped for neutral tokens, and the way back."""
    if wifi is None:
        return text, {}
    swaps: dict[str, str] = {}
    for n, value in enumerate(
        sorted({wifi.network, wifi.password.get_secret_value()}, key=len, reverse=True)
    ):
        token = f"\x00{n}\x00"
        if value and value in text:
            text = text.replace(value, token)
            swaps[token] = value
    return text, swaps


def restore_credentials(text: str, swaps: dict[str, str]) -> str:
    """Undo :func:`protect_credentials`."""
    for token, value in swaps.items():
        text = text.replace(token, value)
    return text


def extract_wifi(
    lines: Iterable[str], *, title: bool = False
) -> tuple[str | None, str | None, list[str]]:
    """The first network and password found in some lines, and notes on conflicting values."""
    network: str | None = None
    password: str | None = None
    notes: list[str] = []
    for line in lines:
        for field, value in _fields(line, title=title):
            if field == "network":
                if network is None:
                    network = value
                elif value != network:
                    notes.append("the WiFi section names more than one network; using the first")
            elif password is None:
                password = value
            elif value != password:
                notes.append("the WiFi section gives more than one password; using the first")
    return network, password, list(dict.fromkeys(notes))


# --- internals ---------------------------------------------------------------------------------


def _candidates(top: list[Block], template: KnowledgeTemplate) -> list[_Candidate]:
    named: list[tuple[int, Block, str]] = []
    for index, block in enumerate(top):
        if block.type == "toggle" or block.type in HEADINGS:
            section = section_of_title(block.plain_text, template)
            if section is not None:
                named.append((index, block, section))
    starts = {index for index, _, _ in named}
    candidates: list[_Candidate] = []
    for index, block, section in named:
        if block.type == "toggle" or block.is_toggleable:
            body = list(block.children)
        else:
            body = _heading_body(top, index, starts)
        candidates.append(
            _Candidate(
                section=section,
                index=index,
                block=block,
                exact=is_exact_title(block.plain_text, section, template),
                body=body,
            )
        )
    return candidates


def _heading_body(top: list[Block], index: int, starts: set[int]) -> list[Block]:
    level = HEADINGS[top[index].type]
    body: list[Block] = []
    for position in range(index + 1, len(top)):
        block = top[position]
        if position in starts or (block.type in HEADINGS and HEADINGS[block.type] <= level):
            break
        body.append(block)
    return body


def _section_descendants(candidate: _Candidate) -> Iterator[Block]:
    for block in candidate.body:
        yield from block.walk()


def _section_lines(candidate: _Candidate) -> Iterator[str]:
    for block in _section_descendants(candidate):
        yield from block.plain_text.splitlines()


def _wifi_of(
    section: _Candidate, others: list[_Candidate]
) -> tuple[WifiCredentials | None, bool, list[str]]:
    title = section.block.plain_text
    title_network, title_password, _ = extract_wifi([title], title=True)
    body_network, body_password, notes = extract_wifi(_section_lines(section))
    network = title_network or body_network
    password = title_password or body_password
    if (title_network and body_network and title_network != body_network) or (
        title_password and body_password and title_password != body_password
    ):
        notes.append("the WiFi title and body disagree on the credentials; the title wins")
    for other in others:
        if network and password:
            break
        other_network, other_password, _ = extract_wifi([other.block.plain_text], title=True)
        more_network, more_password, _ = extract_wifi(_section_lines(other))
        found_network = network or other_network or more_network
        found_password = password or other_password or more_password
        if (found_network, found_password) != (network, password):
            notes.append(
                f"WiFi credentials taken from another WiFi block, {other.block.plain_text!r}"
            )
        network, password = found_network, found_password
    if not network or not password:
        pairs = (("network", network), ("password", password))
        lacking = [name for name, value in pairs if not value]
        notes.append(f"the WiFi section does not give the {' and '.join(lacking)}")
        return None, False, notes
    credentials = WifiCredentials(network=network, password=SecretStr(password))
    # Complete means both read back from the title, so they were taken from it.
    return credentials, bool(title_network and title_password), notes


def _misleading_first_toggle(top: list[Block], chosen: dict[str, _Candidate]) -> str | None:
    first = next((b for b in top if b.type == "toggle"), None)
    if first is None or any(c.block.id == first.id for c in chosen.values()):
        return None
    if GENERAL_QUALIFIER in first.plain_text:
        return None
    return first.id if WIFI_WORD.search(first.body_text()) else None


def _fields(line: str, *, title: bool) -> Iterator[tuple[str, str]]:
    found = False
    # A field right after an accepted one ("Network X, password Y") needs no separator either.
    previous_end = 0
    for match in _FIELD.finditer(line):
        kind = _label_kind(match["label"])
        value = _clean_value(match["value"], kind)
        if kind is None or value is None:
            continue
        leads = bool(_LINE_START.match(line[previous_end : match.start()]))
        if not (title or leads or match["sep"]):
            continue
        found = True
        previous_end = match.end()
        yield kind, value
    if title and not found:
        compact = _COMPACT.match(line)
        if compact:
            network = _clean_value(compact["network"], "network")
            password = _clean_value(compact["password"], "password")
            if network and password:
                yield "network", network
                yield "password", password


def _label_kind(label: str) -> str | None:
    parts = [p.strip() for p in label.split("/")]
    if all(_NETWORK_ONLY.match(p) for p in parts):
        return "network"
    if all(_PASSWORD_ONLY.match(p) for p in parts):
        return "password"
    return None


def _clean_value(raw: str, kind: str | None) -> str | None:
    value = raw.strip()
    if value and value[0] in _QUOTES and value.endswith(_QUOTES[value[0]]) and len(value) > 2:
        # Quotes say "this is the value", even one that looks like a label ("password").
        value = value[1:-1].strip()
        return value or None
    else:
        value = value.rstrip(".,;")
        if kind == "password" and len(value.split()) > 1:
            value = value.split()[0].rstrip(".,;")
    if not value or value.endswith(":") or not any(c.isalnum() for c in value):
        return None
    if _REFUSED_VALUES.match(value):
        return None
    return value


def title_label(title: str) -> str:
    """A WiFi title without the credentials written in it (what comes before them)."""
    starts = [
        match.start()
        for match in _FIELD.finditer(title)
        if (kind := _label_kind(match["label"])) and _clean_value(match["value"], kind)
    ]
    if not starts:
        compact = _COMPACT.match(title)
        if compact:
            starts.append(compact.start("network"))
    prefix = title[: min(starts)] if starts else title
    return prefix.strip().rstrip(SEPARATORS).strip()


def _without_credential_values(title: str) -> str:
    """The title with credential values removed, labels kept."""
    pieces: list[str] = []
    last = 0
    for match in _FIELD.finditer(title):
        if _label_kind(match["label"]) and _clean_value(match["value"], None):
            pieces.append(title[last : match.start("value")])
            last = match.end("value")
    pieces.append(title[last:])
    stripped = "".join(pieces)
    compact = _COMPACT.match(stripped)
    return stripped[: compact.start("network")] if compact else stripped


def _without_credentials(title: str) -> str:
    """The title with whole credential fields (labels and values) removed."""
    stripped = _without_credential_values(title)
    return re.sub(rf"(?<![0-9a-z]){_LABEL}(?![0-9a-z])", " ", stripped, flags=re.IGNORECASE)
