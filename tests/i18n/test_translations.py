"""Every word a customer reads is translated: the catalogue is complete, no text is left bare.

Two checks together: (1) every message the code and templates ask to translate has an
Italian translation that is not fuzzy and keeps the same ``%(name)s`` / ``{name}``
placeholders; (2) a customer-facing template has no text outside ``{% trans %}`` or
``_()``: not between tags, not in a visible attribute (``title``, ``aria-label``,
``placeholder``, ``alt``), not in a string literal of an expression. Branches under
``{% if principal.is_admin %}`` are the platform team's and stay English (docs/i18n.md).
"""

from __future__ import annotations

import re

import pytest
from jinja2 import Environment

from pmsgate.web.templating import TEMPLATES_DIR, templates
from tests.i18n.catalogue import catalogue, extracted

# The templates a customer (or anyone not signed in) sees; the admin_* pages are English.
CUSTOMER_TEMPLATES = sorted(
    path.name for path in TEMPLATES_DIR.glob("*.html") if not path.name.startswith("admin_")
)
_TAG = re.compile(r"<!--.*?-->|<[^>]*>", re.S)
_VISIBLE_ATTRIBUTE = re.compile(r"""\b(?:title|aria-label|placeholder|alt)\s*=\s*"([^"{]*)""")
_ENTITY = re.compile(r"&[a-z]+;|&#\d+;")
_PLACEHOLDER = re.compile(r"%\(\w+\)s|\{\w+\}")


def _placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


def test_every_message_has_an_italian_translation() -> None:
    italian = catalogue("it")
    missing, fuzzy, broken = [], [], []
    for filename, message, line in extracted():
        ids = message if isinstance(message, tuple) else (message,)
        entry = italian.get(ids[0])
        where = f"{filename}:{line}: {ids[0]!r}"
        strings = () if entry is None else entry.string
        strings = strings if isinstance(strings, tuple) else (strings,)
        if entry is None or not all(strings):
            missing.append(where)
        elif entry.fuzzy:
            fuzzy.append(where)
        elif any(_placeholders(s) != _placeholders(ids[0]) for s in strings):
            broken.append(where)
    assert not missing, "untranslated (run `make messages`, then translate):\n" + "\n".join(missing)
    assert not fuzzy, "fuzzy translations to check:\n" + "\n".join(fuzzy)
    assert not broken, "a translation changes the placeholders:\n" + "\n".join(broken)


def bare_text(env: Environment, source: str) -> list[str]:
    """The pieces of ``source`` a reader sees that are not translated.

    The template is reduced to a skeleton: its markup as written, each ``{{ }}`` and
    ``{% %}`` as ``_``, and the letters of translated text (and of admin branches) as
    ``_`` too; whatever letters the skeleton still shows outside tags, or in a visible
    attribute, are bare text.
    """
    found: list[str] = []
    skeleton: list[str] = []
    inside_trans = 0
    # One entry per open {% if %}: whether we are in its principal.is_admin branch now.
    admin_branches: list[bool] = []
    tokens: list[tuple[str, str]] = []
    for _line, kind, value in env.lex(source):
        if kind in ("block_begin", "variable_begin"):
            tokens = []
            continue
        if kind == "variable_end":
            if not any(admin_branches):
                found.extend(_bare_literals(tokens))
            skeleton.append("_")
            continue
        if kind == "block_end":
            words = [v for k, v in tokens if k == "name"]
            head = words[0] if words else ""
            if head == "trans":
                inside_trans += 1
            elif head == "endtrans":
                inside_trans -= 1
            elif head == "if":
                admin_branches.append(" ".join(v for _k, v in tokens[1:]) == "principal . is_admin")
            elif head in ("elif", "else") and admin_branches:
                admin_branches[-1] = False
            elif head == "endif" and admin_branches:
                admin_branches.pop()
            skeleton.append("_")
            continue
        if kind == "data":
            hidden = inside_trans or any(admin_branches)
            skeleton.append(re.sub(r"[A-Za-z]", "_", value) if hidden else value)
        elif kind not in ("comment_begin", "comment", "comment_end", "whitespace"):
            tokens.append((kind, value))
    text = "".join(skeleton)
    for attribute in _VISIBLE_ATTRIBUTE.findall(text):
        if re.search(r"[A-Za-z]{2,}", attribute):
            found.append(attribute.strip())
    for piece in _TAG.split(text):
        words = _ENTITY.sub(" ", piece)
        if re.search(r"[A-Za-z]{2,}", words):
            found.append(" ".join(words.replace("_", " ").split()))
    return found


def _bare_literals(tokens: list[tuple[str, str]]) -> list[str]:
    """String literals of an expression a reader would see: with a space, not in _()."""
    bare = []
    for index, (kind, value) in enumerate(tokens):
        if kind != "string" or not re.search(r"[A-Za-z]{2,}\s+\S", value):
            continue
        before = [v for _k, v in tokens[max(0, index - 2) : index]]
        if before[-2:] in (["_", "("], ["gettext", "("], ["ngettext", "("]):
            continue
        bare.append(value[1:-1] if value[:1] in "'\"" else value)
    return bare


@pytest.mark.parametrize("name", CUSTOMER_TEMPLATES)
def test_customer_template_has_no_untranslated_text(name: str) -> None:
    source = (TEMPLATES_DIR / name).read_text()
    assert bare_text(templates.env, source) == []


def test_the_checker_finds_bare_text() -> None:
    env = templates.env
    assert bare_text(env, "<p>Hello</p>") == ["Hello"]
    assert bare_text(env, '<input placeholder="Your name">') == ["Your name"]
    assert bare_text(env, "{{ 'Started now' if x else '' }}") == ["Started now"]
    assert bare_text(env, "<p>{% trans %}Hello{% endtrans %} {{ _('Go on') }}</p>") == []
    assert bare_text(env, "{% if principal.is_admin %}<p>Admins</p>{% else %}x{% endif %}") == []
    assert bare_text(env, "{% if principal.is_admin %}a{% else %}<p>Yours</p>{% endif %}") == [
        "Yours"
    ]
