"""The docs hold: every setting is in the README; every reference in src/ leads inside the repo.

Code cites the rules it implements as ``docs/requirements.md R4.2`` (or a docs/<topic>.md
page), never a document outside the repository or an issue number.
"""

from __future__ import annotations

import re
from pathlib import Path

from pmsgate.config import Settings

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
SRC = ROOT / "src" / "pmsgate"
DOCS = ROOT / "docs"
REQUIREMENTS = DOCS / "requirements.md"


def test_readme_lists_every_setting_as_an_environment_variable():
    missing = [
        f"PMSGATE_{name.upper()}"
        for name in Settings.model_fields
        if f"`PMSGATE_{name.upper()}`" not in README
    ]
    assert missing == []


def test_readme_quick_start_is_make_demo_and_make_test():
    quick_start = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick_start.splitlines()]
    assert [c for c in commands if c.startswith("make")] == ["make demo", "make test"]


# --- references in src/ lead inside the repository ---------------------------------------------

# Files under src/ whose text a maintainer reads: code, data, templates, catalogues.
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".html", ".j2", ".md", ".txt", ".toml", ".po", ".pot"}

# "spec §7", "Spec §4.3", wrapped over a line ("spec\n# §7") or bare ("(§3)"): any section sign
# but an RFC's ("RFC 9110 §15.5.6", a public standard); the shared DESIGN page and
# reference/upstreams.md; "issue 7", "(issue 16 item 3)", "issues 12 and 25".
OUTSIDE_REFERENCES = {
    "the specification's sections": re.compile(r"(?<!RFC \d{4} )(?<!RFC \d{3} )§"),
    "the shared design page": re.compile(r"DESIGN"),
    "the shared reference page": re.compile(r"\bupstreams\.md\b"),
    "issue numbers": re.compile(r"\bissues?\s+#?\d", re.IGNORECASE),
}

RULE_REFERENCE = re.compile(
    r"docs/requirements\.md((?:(?:[\s#*,;/\u2013-]|\band\b|\bor\b)*\bR\d+(?:\.\d+)?\b)+)"
)
RULE_ANCHOR_REFERENCE = re.compile(r"docs/requirements\.md#(r\d+(?:\.\d+)?)\b")
DOC_LINK = re.compile(r"\bdocs/([\w./-]+?\.md)\b")
RULE_ANCHOR = re.compile(r'<a id="(r\d+(?:\.\d+)?)"></a>')


def _src_texts() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(ROOT)), path.read_text(errors="replace"))
        for path in sorted(SRC.rglob("*"))
        if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts
    ]


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _rule_ids() -> list[str]:
    return RULE_ANCHOR.findall(REQUIREMENTS.read_text())


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text, lower case, punctuation dropped."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = page.read_text()
    headings = re.findall(r"^#{1,6} +(.+?) *$", re.sub(r"```.*?```", "", text, flags=re.S), re.M)
    return {_slug(h) for h in headings} | set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_src_cites_no_specification_section_design_page_or_issue_number():
    found = [
        f"{name}:{_line(text, match.start())}: {match.group(0)!r} ({what})"
        for name, text in _src_texts()
        for what, pattern in OUTSIDE_REFERENCES.items()
        for match in pattern.finditer(text)
    ]
    assert found == []


def test_every_rule_cited_in_src_is_in_docs_requirements():
    known = set(_rule_ids())
    cited: set[str] = set()
    missing = []
    for name, text in _src_texts():
        for match in RULE_REFERENCE.finditer(text):
            for rule in re.findall(r"R\d+(?:\.\d+)?", match.group(1)):
                cited.add(rule.lower())
                if rule.lower() not in known:
                    missing.append(f"{name}:{_line(text, match.start())}: {rule}")
        for match in RULE_ANCHOR_REFERENCE.finditer(text):
            cited.add(match.group(1))
            if match.group(1) not in known:
                missing.append(f"{name}:{_line(text, match.start())}: #{match.group(1)}")
    assert missing == []
    assert cited, "src/ cites no rule of docs/requirements.md"


def test_every_docs_page_named_in_src_exists():
    missing = [
        f"{name}:{_line(text, match.start())}: docs/{match.group(1)}"
        for name, text in _src_texts()
        for match in DOC_LINK.finditer(text)
        if not (DOCS / match.group(1)).is_file()
    ]
    assert missing == []


def test_rules_are_numbered_once_each_in_order():
    ids = _rule_ids()
    assert len(ids) == len(set(ids))
    sections = [rule for rule in ids if "." not in rule]
    assert sections == [f"r{n}" for n in range(1, len(sections) + 1)]
    for rule in ids:
        if "." in rule:
            assert rule.split(".")[0] in sections, rule
            # The item is written where its anchor is: <a id="r4.2"></a>**R4.2**.
            assert f'<a id="{rule}"></a>**{rule.upper()}**' in REQUIREMENTS.read_text()


def test_the_onboarding_rules_number_the_17_steps():
    ids = set(_rule_ids())
    assert {f"r21.{n}" for n in range(1, 18)} <= ids
    assert "r21.18" not in ids


def test_links_in_docs_requirements_lead_to_existing_pages_and_sections():
    text = REQUIREMENTS.read_text()
    broken = []
    for target, anchor in re.findall(r"\]\(([\w./-]*)(?:#([^)\s]+))?\)", text):
        page = DOCS / target if target else REQUIREMENTS
        if not page.is_file():
            broken.append(f"{target} (no such page)")
        elif anchor and anchor not in _anchors(page):
            broken.append(f"{target or 'requirements.md'}#{anchor} (no such section)")
    assert broken == []


def test_modules_named_in_docs_requirements_exist():
    text = REQUIREMENTS.read_text()
    named = set(re.findall(r"`([\w/]+\.(?:py|yaml))`", text))
    files = {path.name for path in SRC.rglob("*") if path.is_file()}
    missing = sorted(
        path
        for path in named
        if not (
            (ROOT / path).is_file()
            if path.startswith(("tests/", "bench/"))
            else (SRC / path).is_file()
            if "/" in path
            else path in files
        )
    )
    assert missing == []
