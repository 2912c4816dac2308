"""The words of incident notices: the customer's (English or Italian) and the team's.

A customer's notice is written for the person who runs the property: plain words, their
own language when the customer record has one (``it`` → Italian, anything else →
English), no internal ids, no error codes, never a secret — the one-time sign-in link is
the only thing in it a stranger could use, and it works once. The team's notice (e-mail
and the chat webhook's ``{"text": …}``) is English and names the facility and customer
ids an operator searches by.
"""

from __future__ import annotations

import email.policy
from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr
from typing import Any, Literal

import jinja2

Language = Literal["en", "it"]
NoticeKind = Literal["error", "recovered"]

_MONTHS: dict[Language, tuple[str, ...]] = {
    "en": (
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ),
    "it": (
        "gennaio",
        "febbraio",
        "marzo",
        "aprile",
        "maggio",
        "giugno",
        "luglio",
        "agosto",
        "settembre",
        "ottobre",
        "novembre",
        "dicembre",
    ),
}
_ERROR_COLOUR = "#b42318"
_RECOVERED_COLOUR = "#067647"


def language_of(value: str | None) -> Language:
    """The notice language for a customer's language setting (``it``, ``it-IT``, ``Italian``)."""
    text = (value or "").strip().lower()
    return "it" if text.startswith(("it", "ital")) else "en"


def when_text(moment: datetime, language: Language) -> str:
    """A moment in words: ``24 November 2026, 21:40 UTC`` / ``24 novembre 2026, 21:40 UTC``."""
    month = _MONTHS[language][moment.month - 1]
    return f"{moment.day} {month} {moment.year}, {moment:%H:%M} UTC"


@dataclass(frozen=True)
class CustomerNotice:
    """What a customer's notice says, before it is rendered."""

    kind: NoticeKind
    language: Language
    customer_name: str
    facility_name: str
    since: datetime
    sign_in_url: str | None = field(default=None, repr=False)  # the one-time link: a secret
    link_expires_at: datetime | None = None
    console_url: str | None = None  # where to sign in normally
    has_login: bool = True


_CUSTOMER_TEXT: dict[Language, dict[str, str]] = {
    "en": {
        "error_subject": "Action needed: reconnect your booking system",
        "error_headline": "Your guest assistant cannot reach your booking system",
        "greeting": "Hello {name},",
        "error_what": "Since {when}, your guest assistant can no longer reach your booking "
        "system{facility}. This usually happens after the booking-system password was changed.",
        "error_impact": "Until it is reconnected, the assistant cannot answer guests' "
        "questions about availability, reservations or check-in.",
        "error_link": "Open the link below and enter your current booking-system password. "
        "It signs you in straight to the reconnect form.",
        "error_link_note": "The link works once, until {expires}. After that, sign in "
        "as usual{console}.",
        "error_no_link": "Sign in to your console{console} and enter your current "
        "booking-system password in the reconnect form.",
        "error_no_login": "You do not have a console login yet: reply to this message and we "
        "will reconnect it with you.",
        "error_next": "We will write again as soon as the connection works.",
        "action": "Reconnect now",
        "recovered_subject": "Your booking system is connected again",
        "recovered_headline": "Your booking system is connected again",
        "recovered_what": "Since {when}, your guest assistant is connected to your booking "
        "system{facility} again.",
        "recovered_impact": "It answers guests' questions about availability, reservations "
        "and check-in as before. There is nothing else to do.",
        "facility": " ({name})",
        "console": " at {url}",
        "sign_off": "Thank you,\n{sender}",
    },
    "it": {
        "error_subject": "Azione richiesta: ricollega il tuo gestionale",
        "error_headline": "Il tuo assistente non raggiunge il gestionale delle prenotazioni",
        "greeting": "Gentile {name},",
        "error_what": "dal {when} il tuo assistente per gli ospiti non riesce più a collegarsi "
        "al tuo gestionale delle prenotazioni{facility}. Di solito succede dopo un cambio "
        "della password del gestionale.",
        "error_impact": "Finché non viene ricollegato, l'assistente non può rispondere alle "
        "domande degli ospiti su disponibilità, prenotazioni o check-in.",
        "error_link": "Apri il link qui sotto e inserisci la password attuale del gestionale: "
        "ti porta direttamente al modulo per ricollegarlo.",
        "error_link_note": "Il link funziona una sola volta, fino al {expires}. Dopo, accedi "
        "come sempre{console}.",
        "error_no_link": "Accedi alla tua console{console} e inserisci la password attuale "
        "del gestionale nel modulo per ricollegarlo.",
        "error_no_login": "Non hai ancora un accesso alla console: rispondi a questo messaggio "
        "e lo ricolleghiamo insieme.",
        "error_next": "Ti scriveremo appena il collegamento funzionerà di nuovo.",
        "action": "Ricollega ora",
        "recovered_subject": "Il tuo gestionale è di nuovo collegato",
        "recovered_headline": "Il tuo gestionale è di nuovo collegato",
        "recovered_what": "dal {when} il tuo assistente per gli ospiti è di nuovo collegato al "
        "tuo gestionale delle prenotazioni{facility}.",
        "recovered_impact": "Risponde come prima alle domande degli ospiti su disponibilità, "
        "prenotazioni e check-in. Non devi fare altro.",
        "facility": " ({name})",
        "console": " su {url}",
        "sign_off": "Grazie,\n{sender}",
    },
}


def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("pmsgate.jobs", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def customer_content(notice: CustomerNotice, sender: str) -> dict[str, Any]:
    """The parts of a customer's notice (subject, paragraphs, the action), in its language."""
    words = _CUSTOMER_TEXT[notice.language]
    facility = words["facility"].format(name=notice.facility_name) if notice.facility_name else ""
    console = words["console"].format(url=notice.console_url) if notice.console_url else ""
    when = when_text(notice.since, notice.language)
    content: dict[str, Any] = {
        "language": notice.language,
        "greeting": words["greeting"].format(name=notice.customer_name),
        "sign_off": words["sign_off"].format(sender=sender),
        "action_url": None,
        "action_label": words["action"],
        "action_note": "",
        "closing": [],
    }
    if notice.kind == "recovered":
        content.update(
            subject=words["recovered_subject"],
            headline=words["recovered_headline"],
            colour=_RECOVERED_COLOUR,
            paragraphs=[
                words["recovered_what"].format(when=when, facility=facility),
                words["recovered_impact"],
            ],
        )
        return content
    paragraphs = [words["error_what"].format(when=when, facility=facility), words["error_impact"]]
    if notice.sign_in_url is not None and notice.link_expires_at is not None:
        paragraphs.append(words["error_link"])
        content["action_url"] = notice.sign_in_url
        content["action_note"] = words["error_link_note"].format(
            expires=when_text(notice.link_expires_at, notice.language), console=console
        )
    elif notice.has_login:
        paragraphs.append(words["error_no_link"].format(console=console))
    else:
        paragraphs.append(words["error_no_login"])
    content.update(
        subject=words["error_subject"],
        headline=words["error_headline"],
        colour=_ERROR_COLOUR,
        paragraphs=paragraphs,
        closing=[words["error_next"]],
    )
    return content


def customer_text(content: dict[str, Any]) -> str:
    """The plain-text body of a customer's notice."""
    parts = [content["greeting"], *content["paragraphs"]]
    if content["action_url"]:
        parts += [f"{content['action_label']}: {content['action_url']}", content["action_note"]]
    parts += [*content["closing"], content["sign_off"]]
    return "\n\n".join(parts) + "\n"


def customer_message(
    notice: CustomerNotice,
    *,
    mail_from: str,
    to: str,
    sent_at: datetime,
    message_id: str,
) -> EmailMessage:
    """The customer's notice as an e-mail (plain text and HTML)."""
    sender = parseaddr(mail_from)[0] or "The guest assistant team"
    content = customer_content(notice, sender)
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = content["subject"]
    message["From"] = mail_from
    message["To"] = to
    message["Date"] = format_datetime(sent_at)
    message["Message-ID"] = message_id
    message.set_content(customer_text(content))
    html = _templates().get_template("incident_notice.html.j2").render(**content)
    message.add_alternative(html, subtype="html")
    message["Content-Language"] = notice.language  # after: a Content-* header moves otherwise
    return message


@dataclass(frozen=True)
class TeamNotice:
    """What the platform team is told about one facility's incident."""

    kind: NoticeKind
    hotel_id: str
    facility_name: str
    since: datetime
    incident_at: datetime
    reason: str | None
    student_id: str | None
    customer_name: str | None
    customer_email: str | None
    customer_told: bool
    admin_url: str | None


def _who(notice: TeamNotice) -> str:
    name = notice.customer_name or notice.facility_name or f"hotel {notice.hotel_id}"
    ids = f"hotel {notice.hotel_id}"
    if notice.student_id:
        ids += f", customer {notice.student_id}"
    return f"{name} ({ids})"


def team_subject(notice: TeamNotice) -> str:
    """The team e-mail's subject."""
    if notice.kind == "recovered":
        return f"[pmsgate] Reconnected: {_who(notice)}"
    return f"[pmsgate] Booking system disconnected: {_who(notice)}"


def team_text(notice: TeamNotice) -> str:
    """The team e-mail's body: what happened, to whom, who was told, where to look."""
    when = when_text(notice.since, "en")
    lines: list[str] = []
    if notice.kind == "recovered":
        minutes = max(0, round((notice.since - notice.incident_at).total_seconds() / 60))
        lines.append(
            f"{_who(notice)} reaches its booking system again since {when} "
            f"(in error for about {minutes} minutes)."
        )
    else:
        lines.append(
            f"{_who(notice)} is in error since {when}: the booking system refuses its "
            "credentials (usually a changed password). The assistant cannot answer booking "
            "questions until it is reconnected."
        )
        if notice.reason:
            lines.append(f"Last error: {notice.reason}")
    if notice.customer_told and notice.customer_email:
        what = "a recovery notice" if notice.kind == "recovered" else "a notice"
        lines.append(f"The customer gets {what} of its own at {notice.customer_email}.")
    elif notice.kind == "error":
        lines.append("No customer address is linked to this facility: nobody else is told.")
    if notice.admin_url:
        lines.append(f"Console: {notice.admin_url}")
    return "\n\n".join(lines) + "\n"


def team_message(
    notice: TeamNotice, *, mail_from: str, to: str, sent_at: datetime, message_id: str
) -> EmailMessage:
    """The team's notice as an e-mail (plain text)."""
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = team_subject(notice)
    message["From"] = mail_from
    message["To"] = to
    message["Date"] = format_datetime(sent_at)
    message["Message-ID"] = message_id
    message.set_content(team_text(notice))
    return message


def webhook_payload(notice: TeamNotice) -> dict[str, str]:
    """The chat message: Slack-compatible ``{"text": …}`` (one line and the console link)."""
    when = when_text(notice.since, "en")
    if notice.kind == "recovered":
        text = (
            f":white_check_mark: Reconnected: {_who(notice)} reaches its booking system "
            f"again since {when}."
        )
    else:
        text = (
            f":warning: Booking system disconnected: {_who(notice)} is in error since {when}; "
            "the customer must reconnect (usually a changed password)."
        )
    if notice.admin_url:
        text += f" {notice.admin_url}"
    return {"text": text}
