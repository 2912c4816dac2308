"""The onboarding message of step 16: what the customer reads, in the customer's language.

Written for the property operator, never in the runbook's words: what is live, what is
still being finished with them (the channel items of step 15 not yet confirmed), how to
sign in to the console, and the 15-minute demo call. One template pair (plain text and
HTML) per language in ``templates/`` — ``onboarding_message.<language>.txt.j2`` and
``.html.j2``, the HTML ones extending the branded layout ``_onboarding_layout.html.j2``
— and the phrases of the live and pending lines below, per language. The language is
the customer file's ``language`` (``it`` by default; ``en``); the brand is the
platform's (``PMSGATE_BRAND_NAME``, ``PMSGATE_BRAND_COLOUR``, the sender of
``PMSGATE_MAIL_FROM``).

Adding a language: its templates, a ``PHRASES`` and ``SUBJECTS`` entry, and the value
in :attr:`pmsgate.onboarding.customer_file.CustomerFile.language`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from email.utils import parseaddr
from typing import Any, Literal

import jinja2

from pmsgate.config import Settings

Language = Literal["it", "en"]
LANGUAGES: tuple[Language, ...] = ("it", "en")

# What is live, in the customer's words (keys: see LiveItem).
PHRASES: dict[Language, dict[str, str]] = {
    "en": {
        "guest_agent": "The assistant answers the messages in your guest inbox, in each "
        "guest's own language, and leaves the last word to you (copilot mode).",
        "tools": "It reads your booking system directly: availability, reservation status, "
        "guests in house, check-in instructions and the state of the check-in portal.",
        "knowledge": "It knows the house manual of your {apartments} apartments: WiFi, "
        "check-in and check-out times, how to reach you, house rules and what to do before "
        "departure.",
        "tested": "We tested it: asked about availability for a few nights, it checked your "
        "booking system and answered.",
        "whatsapp-number": "Your own local WhatsApp number for guests (it usually takes 2 to "
        "10 days).",
        "whatsapp-number-due": "Your own local WhatsApp number for guests (expected by {due}).",
        "voice-agent": "The phone assistant, answering calls in {language}.",
        "voice-agent-forwarding": "The phone assistant, answering calls in {language}: calls "
        "to your number {number} will be forwarded to it.",
        "check-call": "A test call, to make sure calls reach the phone assistant.",
        "check-whatsapp": "A test WhatsApp message, to make sure it reaches the assistant.",
        "check-escalation": "A test alert, to make sure what the assistant passes on to you "
        "reaches you in the right place.",
    },
    "it": {
        "guest_agent": "L'assistente risponde ai messaggi della casella degli ospiti, nella "
        "lingua di ciascun ospite, e lascia a voi l'ultima parola (modalità copilota).",
        "tools": "Consulta direttamente il vostro gestionale: disponibilità, stato delle "
        "prenotazioni, ospiti in casa, istruzioni per il check-in e stato del portale di "
        "check-in.",
        "knowledge": "Conosce il manuale della casa dei vostri {apartments} appartamenti: WiFi, "
        "orari di check-in e check-out, come raggiungervi, regole della casa e cosa fare "
        "prima della partenza.",
        "tested": "L'abbiamo provato: alla richiesta di disponibilità per alcune notti ha "
        "consultato il vostro gestionale e ha risposto.",
        "whatsapp-number": "Il vostro numero WhatsApp locale dedicato agli ospiti (di solito "
        "servono da 2 a 10 giorni).",
        "whatsapp-number-due": "Il vostro numero WhatsApp locale dedicato agli ospiti "
        "(previsto entro il {due}).",
        "voice-agent": "L'assistente telefonico, che risponderà alle chiamate in {language}.",
        "voice-agent-forwarding": "L'assistente telefonico, che risponderà alle chiamate in "
        "{language}: le chiamate al vostro numero {number} gli verranno inoltrate.",
        "check-call": "Una chiamata di prova, per verificare che le telefonate arrivino "
        "all'assistente telefonico.",
        "check-whatsapp": "Un messaggio WhatsApp di prova, per verificare che arrivi "
        "all'assistente.",
        "check-escalation": "Una segnalazione di prova, per verificare che ciò che "
        "l'assistente vi inoltra vi arrivi sul canale giusto.",
    },
}
SUBJECTS: dict[Language, str] = {
    "en": "Your guest assistant is live - {workspace}",
    "it": "Il vostro assistente per gli ospiti è attivo - {workspace}",
}
# A voice agent's language (an ISO code in the customer file) as the customer reads it.
LANGUAGE_NAMES: dict[Language, dict[str, str]] = {
    "en": {"it": "Italian", "en": "English", "de": "German", "fr": "French", "es": "Spanish"},
    "it": {"it": "italiano", "en": "inglese", "de": "tedesco", "fr": "francese", "es": "spagnolo"},
}
MONTHS_IT: tuple[str, ...] = ("gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno")
MONTHS_IT += ("luglio", "agosto", "settembre", "ottobre", "novembre", "dicembre")

LiveItem = Literal["guest_agent", "tools", "knowledge", "tested"]
PendingItem = Literal[
    "whatsapp-number", "voice-agent", "check-call", "check-whatsapp", "check-escalation"
]


@dataclass(frozen=True)
class MessageFacts:
    """What the message says, as facts (the wording is the language's)."""

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


def _date(when: date, language: Language) -> str:
    if language == "it":
        return f"{when.day} {MONTHS_IT[when.month - 1]} {when.year}"
    return f"{when.day} {when.strftime('%B')} {when.year}"


def _pending_line(facts: MessageFacts, item: PendingItem) -> str:
    phrases = PHRASES[facts.language]
    if item == "whatsapp-number" and facts.whatsapp_due is not None:
        return phrases["whatsapp-number-due"].format(due=_date(facts.whatsapp_due, facts.language))
    if item == "voice-agent" and facts.voice_language:
        code = facts.voice_language.strip().lower()
        name = LANGUAGE_NAMES[facts.language].get(code, facts.voice_language)
        if facts.voice_forwarding_from:
            return phrases["voice-agent-forwarding"].format(
                language=name, number=facts.voice_forwarding_from
            )
        return phrases["voice-agent"].format(language=name)
    return phrases[item]


def lines(facts: MessageFacts) -> tuple[list[str], list[str]]:
    """The live and the pending lines, in the customer's language."""
    phrases = PHRASES[facts.language]
    live = [phrases[item].format(apartments=facts.apartments) for item in facts.live]
    pending = [_pending_line(facts, item) for item in facts.pending]
    return live, pending


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("pmsgate.onboarding", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def sender_name(settings: Settings) -> str:
    """Who signs the message: the display name of PMSGATE_MAIL_FROM, else the brand's team."""
    return parseaddr(settings.mail_from)[0] or f"{settings.brand_name}"


def subject(facts: MessageFacts) -> str:
    """The message's subject line."""
    return SUBJECTS[facts.language].format(workspace=facts.workspace_name)


def render(facts: MessageFacts, settings: Settings) -> tuple[str, str]:
    """The message's plain text and HTML, from the language's templates and the brand."""
    live, pending = lines(facts)
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
    env = _environment()
    text = env.get_template(f"onboarding_message.{facts.language}.txt.j2").render(**values)
    html = env.get_template(f"onboarding_message.{facts.language}.html.j2").render(**values)
    return text, html
