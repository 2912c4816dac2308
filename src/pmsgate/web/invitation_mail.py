"""The invitation and password-reset e-mails of console accounts, in the customer's language.

Two purposes, one template pair (``templates/mail/invitation.txt.j2`` and ``.html.j2``,
the HTML one extending the branded e-mail layout of the onboarding message,
``pmsgate/onboarding/templates/_mail_layout.html.j2``):

- ``invite``: the account is ready; choose a password with the one-time link (it works
  once, until its local expiry time), then sign in at the console's ``/login`` with this
  e-mail address;
- ``reset``: someone asked to choose a new password for this address; the link works once
  until …; if it was not you, ignore the e-mail — the password stays as it is.

Every sentence is a ``{% trans %}`` block (or a :func:`~pmsgate.i18n.gettext` call here),
translated through the Babel catalogue (``i18n/locales/it/LC_MESSAGES/mail.po``) in the
customer's language, in the Italian register of docs/i18n.md (``tu``); the expiry is
Babel's date and time in the customer's time zone. Signed with the display name of
``PMSGATE_MAIL_FROM``, else "The <brand> team" in the reader's language. The link is a
secret: it is in the message and nowhere else (no log line, no audit event).
"""

from __future__ import annotations

import email.policy
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any, Literal

import jinja2

from pmsgate import i18n
from pmsgate.i18n import gettext, use_locale
from pmsgate.onboarding.message import mail_environment, signature

MAIL_TEMPLATES_DIR = Path(__file__).parent / "templates" / "mail"


def _subject(purpose: Literal["invite", "reset"], brand_name: str) -> str:
    if purpose == "invite":
        return gettext("Your console account for {brand}").format(brand=brand_name)
    return gettext("Set a new password for {brand}").format(brand=brand_name)


def _environment() -> jinja2.Environment:
    return mail_environment(jinja2.FileSystemLoader(MAIL_TEMPLATES_DIR))


def invitation_message(
    *,
    purpose: Literal["invite", "reset"],
    to: str,
    customer_name: str,
    link_url: str,
    expires_at: datetime,
    console_url: str,
    brand_name: str,
    brand_colour: str,
    mail_from: str,
    language: str,
    timezone: str,
    sent_at: datetime,
    message_id: str,
    support_email: str | None = None,
) -> EmailMessage:
    """The invitation (``invite``) or password-reset (``reset``) e-mail: plain text and HTML.

    ``link_url`` is the one-time link, ``expires_at`` its expiry (shown in ``timezone``),
    ``console_url`` the console's base address (the message says to sign in at its
    ``/login``); ``language`` is the customer's setting (``it``, ``en``, …: Italian when
    unknown). ``support_email``, when set, is where the message says to write with
    questions; otherwise it says to reply.
    """
    if purpose not in ("invite", "reset"):
        raise ValueError(f"unknown purpose {purpose!r}: 'invite' or 'reset'")
    reader_language = i18n.language_of(language)
    with use_locale(reader_language, timezone):
        subject = _subject(purpose, brand_name)
        values: dict[str, Any] = {
            "purpose": purpose,
            "language": reader_language,
            "subject": subject,
            "customer_name": customer_name,
            "email": to,
            "link_url": link_url,
            "expires_date": i18n.format_date(expires_at, "full"),
            "expires_time": i18n.format_time(expires_at),
            "login_url": f"{console_url.rstrip('/')}/login",
            "brand_name": brand_name,
            "brand_colour": brand_colour,
            "support_email": support_email,
            "sender_name": signature(mail_from, brand_name),
        }
        env = _environment()
        text = env.get_template("invitation.txt.j2").render(**values)
        html = env.get_template("invitation.html.j2").render(**values)
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = subject
    message["From"] = mail_from
    message["To"] = to
    message["Date"] = format_datetime(sent_at)
    message["Message-ID"] = message_id
    message.set_content(text)
    message.add_alternative(html, subtype="html")
    message["Content-Language"] = reader_language  # after the content: set_content drops it
    return message
