"""The words of incident notices: the customer's (in their language) and the team's.

A customer's notice is written for the person who runs the property: plain words, their
own language when the customer record has one (``it`` → Italian, anything else →
English), in the Italian register of docs/i18n.md (``tu``), no internal ids, no error
codes, never a secret — the one-time sign-in link is the only thing in it a stranger
could use, and it works once. Its sentences are translated through the Babel catalogue
(``i18n/locales/it/LC_MESSAGES/mail.po``), its dates and times are Babel's in the
customer's locale and time zone, and it is signed with the sender's name or the brand's
team. The team's notice (e-mail and the chat webhook's ``{"text": …}``) is English, in
UTC, and names the facility and customer ids an operator searches by.
"""

from __future__ import annotations

import email.policy
from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Any, Literal

import jinja2

from pmsgate import i18n
from pmsgate.config import Settings
from pmsgate.i18n import Language, gettext, use_locale
from pmsgate.onboarding.message import signature

NoticeKind = Literal["error", "recovered"]

_ERROR_COLOUR = "#b42318"
_RECOVERED_COLOUR = "#067647"
# The brand a notice is signed with when the caller names none (PMSGATE_BRAND_NAME's default).
DEFAULT_BRAND: str = Settings.model_fields["brand_name"].default


def language_of(value: str | None) -> Language:
    """The notice language for a customer's language setting (``it``, ``it-IT``, ``Italian``);
    Italian when it is not known, like everything else a customer reads (docs/i18n.md)."""
    return i18n.language_of(value)


def when_text(moment: datetime, language: Language = "en") -> str:
    """A moment in UTC, for the team: ``24 November 2026, 21:40 UTC`` (Babel's words)."""
    with use_locale(language, "UTC"):
        return f"{i18n.format_date(moment)}, {i18n.format_time(moment)} UTC"


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
    timezone: str = i18n.DEFAULT_TIMEZONE  # the customer's: every time it reads is in it


def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("pmsgate.jobs", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _error_what(notice: CustomerNotice, day: str, time: str) -> str:
    if notice.facility_name:
        return gettext(
            "Since {date} at {time}, your guest assistant can no longer reach your booking "
            "system ({facility}). This usually happens after the booking-system password was "
            "changed."
        ).format(date=day, time=time, facility=notice.facility_name)
    return gettext(
        "Since {date} at {time}, your guest assistant can no longer reach your booking "
        "system. This usually happens after the booking-system password was changed."
    ).format(date=day, time=time)


def _recovered_what(notice: CustomerNotice, day: str, time: str) -> str:
    if notice.facility_name:
        return gettext(
            "Since {date} at {time}, your guest assistant is connected to your booking system "
            "({facility}) again."
        ).format(date=day, time=time, facility=notice.facility_name)
    return gettext(
        "Since {date} at {time}, your guest assistant is connected to your booking system again."
    ).format(date=day, time=time)


def _link_note(notice: CustomerNotice, expires: datetime) -> str:
    day, time = i18n.format_date(expires, "full"), i18n.format_time(expires)
    if notice.console_url:
        return gettext(
            "The link works once, until {date} at {time}. After that, sign in as usual at {url}."
        ).format(date=day, time=time, url=notice.console_url)
    return gettext(
        "The link works once, until {date} at {time}. After that, sign in as usual."
    ).format(date=day, time=time)


def _no_link(notice: CustomerNotice) -> str:
    if notice.console_url:
        return gettext(
            "Sign in to your console at {url} and enter your current booking-system password "
            "in the reconnect form."
        ).format(url=notice.console_url)
    return gettext(
        "Sign in to your console and enter your current booking-system password in the "
        "reconnect form."
    )


def customer_content(notice: CustomerNotice, sender: str) -> dict[str, Any]:
    """The parts of a customer's notice (subject, paragraphs, the action), in its language.

    Times are the customer's local ones (``notice.timezone``); ``sender`` signs it.
    """
    with use_locale(notice.language, notice.timezone):
        return _customer_content(notice, sender)


def _customer_content(notice: CustomerNotice, sender: str) -> dict[str, Any]:
    day, time = i18n.format_date(notice.since, "full"), i18n.format_time(notice.since)
    farewell = gettext("Thank you,")
    content: dict[str, Any] = {
        "language": notice.language,
        "greeting": gettext("Hello {name},").format(name=notice.customer_name),
        "farewell": farewell,
        "sender": sender,
        "sign_off": f"{farewell}\n{sender}",
        "action_url": None,
        "action_label": gettext("Reconnect now"),
        "action_note": "",
        "closing": [],
    }
    if notice.kind == "recovered":
        content.update(
            subject=gettext("Your booking system is connected again"),
            headline=gettext("Your booking system is connected again"),
            colour=_RECOVERED_COLOUR,
            paragraphs=[
                _recovered_what(notice, day, time),
                gettext(
                    "It answers guests' questions about availability, reservations and "
                    "check-in as before. There is nothing else to do."
                ),
            ],
        )
        return content
    paragraphs = [
        _error_what(notice, day, time),
        gettext(
            "Until it is reconnected, the assistant cannot answer guests' questions about "
            "availability, reservations or check-in."
        ),
    ]
    if notice.sign_in_url is not None and notice.link_expires_at is not None:
        paragraphs.append(
            gettext(
                "Open the link below and enter your current booking-system password. It signs "
                "you in straight to the reconnect form."
            )
        )
        content["action_url"] = notice.sign_in_url
        content["action_note"] = _link_note(notice, notice.link_expires_at)
    elif notice.has_login:
        paragraphs.append(_no_link(notice))
    else:
        paragraphs.append(
            gettext(
                "You do not have a console login yet: reply to this message and we will "
                "reconnect it with you."
            )
        )
    content.update(
        subject=gettext("Action needed: reconnect your booking system"),
        headline=gettext("Your guest assistant cannot reach your booking system"),
        colour=_ERROR_COLOUR,
        paragraphs=paragraphs,
        closing=[gettext("We will write again as soon as the connection works.")],
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
    brand_name: str = DEFAULT_BRAND,
) -> EmailMessage:
    """The customer's notice as an e-mail (plain text and HTML), in the customer's language.

    Signed with the display name of ``mail_from``, else "The ``brand_name`` team".
    """
    with use_locale(notice.language, notice.timezone):
        content = customer_content(notice, signature(mail_from, brand_name))
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
