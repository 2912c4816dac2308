"""The onboarding message of step 16: what the customer reads, in the customer's language.

Written for the property operator, never in the runbook's words: what is live, what is
still being finished with them (the channel items of step 15 not yet confirmed), where
and how to sign in to the console (the invitation to choose a password is a separate
e-mail), and the 15-minute demo call. One template pair in ``templates/`` —
``onboarding_message.txt.j2`` and ``.html.j2``, the HTML one extending the branded
e-mail layout ``_mail_layout.html.j2`` — whose sentences are ``{% trans %}`` blocks, and
the phrases of the live and pending lines below, marked with :func:`~pmsgate.i18n.N_`:
all translated through the Babel catalogue (``i18n/locales/it/LC_MESSAGES/mail.po``) in
the customer file's ``language`` (``it`` by default; ``en``), in the Italian register of
docs/i18n.md (``tu``). Dates are Babel's, in the customer's locale. The brand is the
platform's (``PMSGATE_BRAND_NAME``, ``PMSGATE_BRAND_COLOUR``, the sender of
``PMSGATE_MAIL_FROM``).

Adding a language: its catalogue under ``i18n/locales/`` and the value in
:attr:`pmsgate.onboarding.customer_file.CustomerFile.language`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from email.utils import parseaddr
from pathlib import Path
from typing import Any, Literal

import jinja2

from pmsgate import i18n
from pmsgate.config import Settings
from pmsgate.i18n import N_, Language, gettext, ngettext, use_locale

TEMPLATES_DIR = Path(__file__).parent / "templates"

LiveItem = Literal["guest_agent", "tools", "knowledge", "tested"]
PendingItem = Literal[
    "whatsapp-number", "voice-agent", "check-call", "check-whatsapp", "check-escalation"
]

# What is live and what is still being finished, in the customer's words (translated at use).
PHRASES: dict[str, str] = {
    "guest_agent": N_(
        "The assistant answers the messages in your guest inbox, in each guest's own "
        "language, and leaves the last word to you (copilot mode)."
    ),
    "tools": N_(
        "It reads your booking system directly: availability, reservation status, guests in "
        "house, check-in instructions and the state of the check-in portal."
    ),
    # The number of apartments unknown (the "knowledge" line with a count: _knowledge_line).
    "knowledge": N_(
        "It knows the house manual of your apartments: WiFi, check-in and check-out times, "
        "how to reach you, house rules and what to do before departure."
    ),
    "tested": N_(
        "We tested it: asked about availability for a few nights, it checked your booking "
        "system and answered."
    ),
    "whatsapp-number": N_(
        "Your own local WhatsApp number for guests (it usually takes 2 to 10 days)."
    ),
    "voice-agent": N_("The phone assistant, answering your guests' calls."),
    "check-call": N_("A test call, to make sure calls reach the phone assistant."),
    "check-whatsapp": N_("A test WhatsApp message, to make sure it reaches the assistant."),
    "check-escalation": N_(
        "A test alert, to make sure what the assistant passes on to you reaches you in the "
        "right place."
    ),
}


@dataclass(frozen=True)
class MessageFacts:
    """What the message says, as facts (the wording is the catalogue's)."""

    language: Language
    customer_name: str
    workspace_name: str
    login_url: str
    login_email: str
    demo_call_url: str
    live: tuple[LiveItem, ...]
    apartments: int = 0
    pending: tuple[PendingItem, ...] = ()
    whatsapp_due: date | None = None
    voice_language: str | None = None  # an ISO code, e.g. "it"
    voice_forwarding_from: str | None = None
    timezone: str = i18n.DEFAULT_TIMEZONE  # the customer file's: the zone of any time shown


def _language_name(code: str) -> str:
    """A voice agent's language (an ISO code) as the reader says it: CLDR's name."""
    key = code.strip().lower().replace("-", "_")
    return i18n.locale().languages.get(key) or i18n.locale().languages.get(key[:2]) or code


def _knowledge_line(apartments: int) -> str:
    if apartments <= 0:
        return gettext(PHRASES["knowledge"])
    return ngettext(
        "It knows the house manual of {apartments} apartment: WiFi, check-in and check-out "
        "times, how to reach you, house rules and what to do before departure.",
        "It knows the house manual of your {apartments} apartments: WiFi, check-in and "
        "check-out times, how to reach you, house rules and what to do before departure.",
        apartments,
    ).format(apartments=apartments)


def _pending_line(facts: MessageFacts, item: PendingItem) -> str:
    if item == "whatsapp-number" and facts.whatsapp_due is not None:
        return gettext("Your own local WhatsApp number for guests (expected by {due}).").format(
            due=i18n.format_date(facts.whatsapp_due, "full")
        )
    if item == "voice-agent" and facts.voice_language:
        name = _language_name(facts.voice_language)
        if facts.voice_forwarding_from:
            return gettext(
                "The phone assistant, answering calls in {language}: calls to your number "
                "{number} will be forwarded to it."
            ).format(language=name, number=facts.voice_forwarding_from)
        return gettext("The phone assistant, answering calls in {language}.").format(language=name)
    return gettext(PHRASES[item])


def lines(facts: MessageFacts) -> tuple[list[str], list[str]]:
    """The live and the pending lines, in the customer's language."""
    with use_locale(facts.language, facts.timezone):
        live = [
            _knowledge_line(facts.apartments) if item == "knowledge" else gettext(PHRASES[item])
            for item in facts.live
        ]
        pending = [_pending_line(facts, item) for item in facts.pending]
    return live, pending


def mail_environment(*loaders: jinja2.BaseLoader) -> jinja2.Environment:
    """A Jinja2 environment for e-mail templates: ``{% trans %}`` in the reader's language.

    Its templates find the branded layout ``_mail_layout.html.j2`` (this package's
    ``templates/``) after ``loaders``' own; render them inside
    :func:`pmsgate.i18n.use_locale`. HTML (``.html.j2``) is autoescaped, plain text not.
    """
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([*loaders, jinja2.FileSystemLoader(TEMPLATES_DIR)]),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.i18n"],
    )
    env.install_gettext_callables(  # type: ignore[attr-defined]
        i18n.gettext, i18n.ngettext, newstyle=True
    )
    return env


def signature(mail_from: str, brand_name: str) -> str:
    """Who signs an e-mail: PMSGATE_MAIL_FROM's display name, else the brand's team.

    The team's name is in the reader's language: call it inside :func:`use_locale`.
    """
    return parseaddr(mail_from)[0].strip() or gettext("The {brand} team").format(brand=brand_name)


def sender_name(settings: Settings) -> str:
    """Who signs the message: the display name of PMSGATE_MAIL_FROM, else the brand's team."""
    return signature(settings.mail_from, settings.brand_name)


def subject(facts: MessageFacts) -> str:
    """The message's subject line, in the customer's language."""
    with use_locale(facts.language, facts.timezone):
        return gettext("Your guest assistant is live: {workspace}").format(
            workspace=facts.workspace_name
        )


def render(facts: MessageFacts, settings: Settings) -> tuple[str, str]:
    """The message's plain text and HTML, in the customer's language, with the brand."""
    live, pending = lines(facts)
    with use_locale(facts.language, facts.timezone):
        values: dict[str, Any] = {
            "language": facts.language,
            "customer_name": facts.customer_name,
            "workspace_name": facts.workspace_name,
            "live": live,
            "pending": pending,
            "login_url": facts.login_url,
            "login_email": facts.login_email,
            "demo_call_url": facts.demo_call_url,
            "sender_name": sender_name(settings),
            "brand_name": settings.brand_name,
            "brand_colour": settings.brand_colour,
            "subject": subject(facts),
        }
        env = mail_environment()
        text = env.get_template("onboarding_message.txt.j2").render(**values)
        html = env.get_template("onboarding_message.html.j2").render(**values)
    return text, html
