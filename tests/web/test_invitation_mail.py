"""The invitation and password-reset e-mails: the customer's language, time zone and brand.

What the customer reads: the one-time link with its local expiry, where and with which
address to sign in (invitation), that nothing changes if they did not ask (reset); in
Italian with "tu", signed by the sender's name or the brand's team in the reader's
language, never an English word in the Italian one and never the code name.
"""

from __future__ import annotations

import email
import email.policy
import html as html_module
import re
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any, Literal

import pytest

from pmsgate.onboarding.message import mail_environment
from pmsgate.web.invitation_mail import MAIL_TEMPLATES_DIR, invitation_message
from tests.i18n.test_translations import bare_text

SENT = datetime(2026, 11, 24, 21, 40, tzinfo=UTC)
LINK = "https://console.example.test/login/link/abcdefghijklmnopqrstuvwxyz012345"


def _message(
    purpose: Literal["invite", "reset"] = "invite", language: str = "it", **changes: Any
) -> EmailMessage:
    values: dict[str, Any] = {
        "purpose": purpose,
        "to": "owner@casa.example",
        "customer_name": "Casa <Rossa> & Co",
        "link_url": LINK,
        "expires_at": SENT + timedelta(days=7),
        "console_url": "https://console.example.test",
        "brand_name": "Lakeview Host",
        "brand_colour": "#12a150",
        "mail_from": "accounts@lakeview.example",
        "language": language,
        "timezone": "Europe/Rome",
        "sent_at": SENT,
        "message_id": "<invite.1@lakeview.example>",
    }
    values.update(changes)
    message = invitation_message(**values)
    # As the mail server gets it: serialised, then parsed again.
    parsed = email.message_from_bytes(bytes(message), policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def _bodies(message: EmailMessage) -> tuple[str, str]:
    text = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert text is not None and html is not None
    # The SMTP policy ends lines with CRLF on the wire; read them as a client shows them.
    return (
        str(text.get_content()).replace("\r\n", "\n"),
        str(html.get_content()).replace("\r\n", "\n"),
    )


def _words(html: str) -> str:
    """What a reader of the HTML sees: a line break as a space, the other tags out."""
    html = re.sub(r"<br\s*/?>", " ", html)
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", "", html)).split())


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_an_italian_invitation_says_tu_with_the_local_expiry_and_how_to_sign_in() -> None:
    message = _message()
    text, html = _bodies(message)
    assert message["Subject"] == "Il tuo account per la console di Lakeview Host"
    assert message["Content-Language"] == "it"
    assert message["To"] == "owner@casa.example"
    assert message["From"] == "accounts@lakeview.example"
    assert message["Message-ID"] == "<invite.1@lakeview.example>"
    for body in (_flat(text), _words(html)):
        assert "Ciao Casa <Rossa> & Co," in body
        assert "il tuo account per la console di Lakeview Host è pronto" in body
        assert "Per iniziare, scegli la tua password con questo link:" in body
        # A week later, 22:40 in Rome (21:40 UTC): the customer's local time.
        assert "Il link funziona una sola volta, fino a martedì 1 dicembre 2026 alle 22:40." in body
        assert (
            "Dopo, accedi su https://console.example.test/login con il tuo indirizzo e-mail "
            "owner@casa.example e la tua password." in body
        )
        assert '"Hai dimenticato la password?"' in body
        assert "Domande? Rispondi pure a questa e-mail." in body
        assert "A presto, Il team di Lakeview Host" in body
        for word in ("hello", "sign in", "password stays", "team of", "utc", "pmsgate", "vostr"):
            assert word not in body.lower(), word
    assert LINK in text.split()
    assert f'href="{LINK}"' in html
    assert 'href="https://console.example.test/login"' in html
    assert '<html lang="it">' in html and "#12a150" in html
    assert "Ti diamo il benvenuto su Lakeview Host" in html
    assert "Casa &lt;Rossa&gt; &amp; Co" in html and "<Rossa>" not in html


def test_an_english_invitation_in_the_customers_time_zone() -> None:
    message = _message(language="en", timezone="America/New_York", console_url="https://c.test/")
    text, html = _bodies(message)
    assert message["Subject"] == "Your console account for Lakeview Host"
    assert message["Content-Language"] == "en"
    for body in (_flat(text), _words(html)):
        assert "Hello Casa <Rossa> & Co," in body
        assert "Your console account for Lakeview Host is ready." in body
        assert "The link works once, until Tuesday, 1 December 2026 at 16:40." in body
        assert (
            "After that, sign in at https://c.test/login with your e-mail address "
            "owner@casa.example and your password." in body
        )
        assert "See you soon, The Lakeview Host team" in body


def test_a_reset_says_nothing_changes_if_it_was_not_you() -> None:
    message = _message("reset", support_email="aiuto@lakeview.example")
    text, html = _bodies(message)
    assert message["Subject"] == "Imposta una nuova password per Lakeview Host"
    for body in (_flat(text), _words(html)):
        assert (
            "qualcuno ha chiesto di impostare una nuova password per il tuo account "
            "owner@casa.example sulla console di Lakeview Host." in body
        )
        assert "Per scegliere una nuova password, usa questo link:" in body
        assert "fino a martedì 1 dicembre 2026 alle 22:40" in body
        assert (
            "Se la richiesta non è partita da te, ignora questa e-mail: la tua password resta "
            "quella di prima." in body
        )
        assert "Domande? Scrivi a aiuto@lakeview.example." in body
        assert "accedi su" not in body  # the invitation's sign-in paragraph is not here
    assert 'href="mailto:aiuto@lakeview.example"' in html
    assert "Scegli una nuova password" in html
    english, _ = _bodies(_message("reset", language="en"))
    assert "If it was not you, ignore this e-mail: your password stays as it is." in _flat(english)
    assert _message("reset", language="en")["Subject"] == "Set a new password for Lakeview Host"


@pytest.mark.parametrize(
    ("mail_from", "language", "signed"),
    [
        ("Giulia Rossi <accounts@lakeview.example>", "it", "A presto,\nGiulia Rossi"),
        ("accounts@lakeview.example", "it", "A presto,\nIl team di Lakeview Host"),
        ("accounts@lakeview.example", "en", "See you soon,\nThe Lakeview Host team"),
    ],
)
def test_signed_by_the_senders_name_else_the_brands_team(
    mail_from: str, language: str, signed: str
) -> None:
    text, _ = _bodies(_message(mail_from=mail_from, language=language))
    assert text.rstrip().endswith(signed)


@pytest.mark.parametrize(("setting", "expected"), [("it-IT", "it"), ("en_GB", "en"), ("", "it")])
def test_the_language_setting_is_read_like_everywhere_else(setting: str, expected: str) -> None:
    assert _message(language=setting)["Content-Language"] == expected


def test_an_unknown_purpose_is_refused() -> None:
    with pytest.raises(ValueError, match="purpose"):
        _message("welcome")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["invitation.txt.j2", "invitation.html.j2"])
def test_the_templates_have_no_untranslated_text(name: str) -> None:
    source = (MAIL_TEMPLATES_DIR / name).read_text()
    assert bare_text(mail_environment(), source) == []
