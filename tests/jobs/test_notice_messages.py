"""The words of incident notices: the customer's language and time zone, plain words, the link
only for them; the team's in English and UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pmsgate.jobs import notice_messages
from pmsgate.jobs.notice_messages import (
    CustomerNotice,
    TeamNotice,
    customer_message,
    language_of,
    team_message,
    webhook_payload,
)
from pmsgate.onboarding.message import mail_environment
from tests.i18n.test_translations import bare_text

WHEN = datetime(2026, 11, 24, 21, 40, tzinfo=UTC)
LINK = "https://console.example.com/login/link/abcdefghijklmnop"


def _customer(kind: str = "error", language: str = "en", **fields: object) -> CustomerNotice:
    values: dict[str, object] = {
        "kind": kind,
        "language": language,
        "customer_name": "Casa <Rossa> & Co",
        "facility_name": "Casa Rossa Apartments",
        "since": WHEN,
        "sign_in_url": LINK,
        "link_expires_at": WHEN + timedelta(hours=24),
        "console_url": "https://console.example.com/login",
    }
    values.update(fields)
    return CustomerNotice(**values)  # type: ignore[arg-type]


def _render(
    notice: CustomerNotice, mail_from: str = "help@example.com", brand_name: str = "Lakeview Host"
) -> tuple[str, str, str]:
    message = customer_message(
        notice,
        mail_from=mail_from,
        to="owner@example.com",
        sent_at=WHEN,
        message_id="<incident.1@example.com>",
        brand_name=brand_name,
    )
    assert message["Content-Language"] == notice.language
    plain = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert plain is not None and html is not None
    return str(message["Subject"]), plain.get_content(), html.get_content()


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("it", "it"), ("it-IT", "it"), ("Italian", "it"), ("en", "en"), ("de", "it"), (None, "it")],
)
def test_the_language_comes_from_the_customer_record_with_italian_by_default(
    setting: str | None, expected: str
) -> None:
    assert language_of(setting) == expected


def test_an_italian_customer_reads_italian_with_its_local_times_and_the_brand() -> None:
    subject, text, html = _render(_customer(language="it"))
    assert subject == "Azione richiesta: ricollega il tuo gestionale"
    assert text.startswith("Ciao Casa <Rossa> & Co,\n\nda martedì 24 novembre 2026 alle 22:40 ")
    assert "(Casa Rossa Apartments)" in text
    assert "fino a mercoledì 25 novembre 2026 alle 22:40" in text
    assert "accedi come sempre su https://console.example.com/login" in text
    assert f"Ricollega ora: {LINK}" in text
    assert text.endswith("Grazie,\nIl team di Lakeview Host\n")
    assert "UTC" not in text and "Hello" not in text and "team of" not in text
    assert 'lang="it"' in html and "Il team di Lakeview Host" in html
    subject, text, _ = _render(_customer("recovered", language="it"))
    assert subject == "Il tuo gestionale è di nuovo collegato"
    assert "da martedì 24 novembre 2026 alle 22:40 il tuo assistente" in text
    assert "Non devi fare altro" in text


def test_times_are_in_the_customers_time_zone() -> None:
    _, text, _ = _render(_customer(timezone="America/New_York"))
    assert "Since Tuesday, 24 November 2026 at 16:40, your guest assistant" in text
    assert "until Wednesday, 25 November 2026 at 16:40" in text
    _, text, _ = _render(_customer(language="it", timezone="Asia/Tokyo"))
    assert "da mercoledì 25 novembre 2026 alle 06:40" in text


def test_the_notice_is_signed_by_the_senders_name_else_the_brands_team() -> None:
    _, text, html = _render(_customer(), mail_from="Giulia <help@example.com>")
    assert text.endswith("Thank you,\nGiulia\n") and "Thank you,<br>Giulia" in html
    _, text, _ = _render(_customer(), brand_name="Casa Host")
    assert text.endswith("Thank you,\nThe Casa Host team\n")
    assert "pmsgate" not in text.lower()


def test_the_html_part_escapes_what_the_customer_record_says() -> None:
    _, text, html = _render(_customer())
    assert "Hello Casa <Rossa> & Co," in text
    assert "Casa &lt;Rossa&gt; &amp; Co" in html
    assert "<Rossa>" not in html
    assert f'href="{LINK}"' in html


def test_without_a_link_the_customer_is_told_how_to_sign_in_or_to_reply() -> None:
    _, text, _ = _render(_customer(sign_in_url=None, link_expires_at=None))
    assert "/login/link/" not in text
    assert "Sign in to your console at https://console.example.com/login" in text
    _, text, _ = _render(_customer(sign_in_url=None, link_expires_at=None, has_login=False))
    assert "reply to this message" in text
    _, text, _ = _render(_customer(sign_in_url=None, link_expires_at=None, console_url=None))
    assert "Sign in to your console and enter" in text
    _, text, _ = _render(_customer(language="it", sign_in_url=None, link_expires_at=None))
    assert "Accedi alla tua console su https://console.example.com/login e inserisci" in text


def test_the_team_gets_the_ids_and_the_console_page_never_the_customers_link() -> None:
    notice = TeamNotice(
        kind="error",
        hotel_id="4711",
        facility_name="Casa Rossa Apartments",
        since=WHEN,
        incident_at=WHEN,
        reason="The booking system refused the credentials.",
        student_id="stu-4711",
        customer_name="Casa Rossa",
        customer_email="owner@example.com",
        customer_told=True,
        admin_url="https://console.example.com/console/customers/stu-4711",
    )
    message = team_message(
        notice,
        mail_from="pmsgate <ops@example.com>",
        to="team@example.com",
        sent_at=WHEN,
        message_id="<x@example.com>",
    )
    body = message.get_content()
    assert "hotel 4711, customer stu-4711" in str(message["Subject"])
    assert "since 24 November 2026, 21:40 UTC" in body  # the team reads UTC, in English
    assert "refused the credentials" in body and "owner@example.com" in body
    assert "/login/link/" not in body
    payload = webhook_payload(notice)
    assert list(payload) == ["text"]
    assert payload["text"].startswith(":warning:")
    assert "https://console.example.com/console/customers/stu-4711" in payload["text"]
    assert "since 24 November 2026, 21:40 UTC" in payload["text"]


def test_the_notice_template_has_no_words_of_its_own() -> None:
    templates = Path(notice_messages.__file__).parent / "templates"
    source = (templates / "incident_notice.html.j2").read_text()
    assert bare_text(mail_environment(), source) == []
