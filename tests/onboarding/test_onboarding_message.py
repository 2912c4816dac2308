"""Step 16 holds what the spec says (issue 16): the "live" message and the baseline.

- The message goes out only when every automatable step holds: on Route B after step
  17's test conversation passed — a failing test conversation sends nothing.
- It is written for the customer, in the customer's language (Italian with "tu",
  English), from the branded templates and the catalogue: no runbook wording, no
  backticks; it says where to sign in and that the password link is a separate e-mail.
- The baseline is the platform's usage when it can be read, "unknown" with the reason
  when the platform has no usage API — never invented zeros.

Through the runner and the real clients on the emulators (the gateway served on loopback
for Route B's custom tools).
"""

from __future__ import annotations

import email
import email.policy
import html as html_module
import re
from datetime import date
from decimal import Decimal
from email.message import EmailMessage
from pathlib import Path

import pytest

from pmsgate.config import Settings
from pmsgate.onboarding.message import (
    TEMPLATES_DIR,
    Language,
    MessageFacts,
    lines,
    mail_environment,
    render,
    subject,
)
from pmsgate.onboarding.steps import OnboardingContext
from pmsgate.onboarding.steps_channels import (
    ONBOARDING_MESSAGE,
    check_onboarding_message,
    outbox_path,
    record_baseline,
)
from pmsgate.onboarding.steps_setup import (
    apply_notion_integration,
    apply_workspace,
    apply_workspace_configuration,
)
from tests.i18n.test_translations import bare_text

from .sandbox_customer import onboarding_sandbox
from .step_support import live_gateway
from .test_onboarding_e2e import OWN_TWO, outcome, statuses, world

pytestmark = pytest.mark.anyio

RUNBOOK_WORDS = ("`", "multilingual", "never", "copilot`", "partner_markup", "pmsgate", "step ")


def words(html: str) -> str:
    """What a reader of the HTML sees: the tags out, the entities decoded."""
    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


def read_message(path: Path) -> tuple[EmailMessage, str, str]:
    message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    text = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert text is not None and html is not None
    return message, text.get_content(), html.get_content()


# --- Route B: the test conversation first --------------------------------------------------------


async def test_route_b_with_a_failing_test_conversation_sends_no_live_message(
    database_url: str, tmp_path: Path
) -> None:
    async with world(database_url, tmp_path, OWN_TWO) as w:
        # No gateway is served at the configured URL: the agent's check-availability fails.
        failed = await w.onboard()
        outbox = tmp_path / "outbox"
        sent_after_failure = sorted(outbox.iterdir()) if outbox.exists() else []
        baseline_after_failure = await w.services.customers.usage.baseline(w.file.student_id)

        async with live_gateway(w.settings, w.app, w.clock):
            passed = await w.onboard()

    # The run ran 17 before 16 and failed at 17: nothing went out, no baseline either.
    assert failed.route == "B"
    assert failed.status == "failed" and failed.ended_at_step == "route-b-quick-setup"
    assert "has not called check-availability successfully" in (failed.message or "")
    assert ONBOARDING_MESSAGE.id not in statuses(failed)
    assert sent_after_failure == []
    assert baseline_after_failure is None

    # Once the test conversation passes, the same runbook sends the message, once.
    ids = [o.id for o in passed.outcomes]
    assert ids.index("route-b-quick-setup") < ids.index(ONBOARDING_MESSAGE.id)
    assert passed.status == "succeeded", (passed.ended_at_step, passed.message)
    assert statuses(passed)[ONBOARDING_MESSAGE.id] == "done"
    evidence = outcome(passed, ONBOARDING_MESSAGE.id).evidence
    assert evidence["language"] == "it"
    assert evidence["baseline"]["messages"] == 2  # the platform's: two test conversations
    [path] = sorted((tmp_path / "outbox").glob("*-onboarding.eml"))
    message, text, html = read_message(path)
    assert message["Message-ID"] == evidence["message"]["message_id"]
    assert message["Content-Language"] == "it"
    assert "attivo" in message["Subject"]
    for body in (text, words(html)):
        assert "L'abbiamo provato" in body  # the passed availability test, in words
        assert "ti abbiamo inviato un'e-mail a parte" in body  # the invitation, below
        for word in RUNBOOK_WORDS:
            assert word not in body.lower(), word
    # The invitation to choose a password: a separate e-mail, in the customer's language too.
    [invitation] = sorted((tmp_path / "outbox").glob("invite*.eml"))
    invite, invite_text, _ = read_message(invitation)
    assert invite["Content-Language"] == "it"
    assert invite["Subject"].startswith("Il tuo account per la console di ")
    assert "/login/link/" in invite_text and "pmsgate" not in invite_text.lower()


async def test_the_message_waits_naming_the_steps_that_do_not_hold(
    database_url: str, tmp_path: Path
) -> None:
    async with onboarding_sandbox(database_url, tmp_path) as box:
        ctx = box.services.context(box.file())
        ctx.route = "B"
        result = await check_onboarding_message(ctx)
    assert not result.done and result.waiting_for is not None
    assert "17 (route-b-quick-setup)" in result.message
    assert "route-b-quick-setup" in result.evidence["waiting_for_steps"]
    assert not outbox_path(ctx).exists()


# --- the wording: the customer's language, the brand ---------------------------------------------


def facts(language: Language) -> MessageFacts:
    return MessageFacts(
        language=language,
        customer_name="Lakeside Apartments",
        workspace_name="Lakeside Apartments",
        login_url="https://app.assistant.example/login",
        login_email="owner@lakeside.example",
        demo_call_url="https://cal.example/platform-team/15min",
        live=("guest_agent", "tools", "knowledge"),
        apartments=4,
        pending=("whatsapp-number", "voice-agent", "check-call", "check-escalation"),
        whatsapp_due=date(2026, 11, 30),
        voice_language="it",
        voice_forwarding_from="+39 031 555 0199",
    )


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        (
            "en",
            [
                "Hello Lakeside Apartments,",
                'Your guest assistant is now live for "Lakeside Apartments".',
                "What is live today",
                "house manual of your 4 apartments",
                "expected by Monday, 30 November 2026",
                "answering calls in Italian",
                "+39 031 555 0199",
                "Sign in at https://app.assistant.example/login with owner@lakeside.example; "
                "we sent you a separate e-mail with a link to choose your password.",
                "A 15-minute demo call",
                "See you soon,",
            ],
        ),
        (
            "it",
            [
                "Ciao Lakeside Apartments,",
                'il tuo assistente per gli ospiti ora è attivo per "Lakeside Apartments".',
                "Cosa è attivo da oggi",
                "lascia a te l'ultima parola",
                "manuale della casa dei tuoi 4 appartamenti",
                "previsto entro lunedì 30 novembre 2026",
                "risponderà alle chiamate in italiano",
                "le chiamate al tuo numero +39 031 555 0199",
                "Accedi su https://app.assistant.example/login con owner@lakeside.example; "
                "ti abbiamo inviato un'e-mail a parte con un link per scegliere la tua password.",
                "Una chiamata dimostrativa di 15 minuti",
                "A presto,",
            ],
        ),
    ],
)
def test_the_message_is_written_for_the_customer_in_its_language(
    language: Language, expected: list[str]
) -> None:
    settings = Settings(
        brand_name="Lakeview Host", brand_colour="#12a150", mail_from="Anna <anna@brand.example>"
    )
    text, html = render(facts(language), settings)
    for phrase in expected:
        assert phrase in text, phrase
        assert phrase in words(html), phrase
    for body in (text, html):
        assert "https://app.assistant.example/login" in body
        assert "https://cal.example/platform-team/15min" in body
        assert "Lakeview Host" in body and "Anna" in body
        for word in RUNBOOK_WORDS:
            assert word not in body.lower(), word
    assert f'<html lang="{language}">' in html
    assert "#12a150" in html
    assert 'href="https://app.assistant.example/login"' in html


# The Italian of the old per-language copies ("voi") and English words that must not show.
NOT_ITALIAN_TU = ("vostr", "voi ", "accedete", "prenotate", "benvenuti", "gentile", "buongiorno")


def test_the_italian_message_says_tu_and_is_signed_by_the_brand_in_italian() -> None:
    settings = Settings(brand_name="Lakeview Host", mail_from="onboarding@brand.example")
    text, html = render(facts("it"), settings)
    assert subject(facts("it")) == "Il tuo assistente per gli ospiti è attivo: Lakeside Apartments"
    for body in (text, words(html)):
        assert "A presto," in body and "Il team di Lakeview Host" in body
        for word in (*NOT_ITALIAN_TU, "hello", "sign in", "the lakeview host team", "welcome"):
            assert word not in body.lower(), word
    assert text.rstrip().endswith("A presto,\nIl team di Lakeview Host")
    english, _ = render(facts("en"), settings)
    assert english.rstrip().endswith("See you soon,\nThe Lakeview Host team")
    assert subject(facts("en")) == "Your guest assistant is live: Lakeside Apartments"


def test_the_lines_count_the_apartments_and_name_the_voice_language_in_the_readers_words() -> None:
    one = MessageFacts(**{**facts("it").__dict__, "apartments": 1, "voice_forwarding_from": None})
    live, pending = lines(one)
    assert "Conosce il manuale della casa di 1 appartamento:" in live[2]
    assert "L'assistente telefonico, che risponderà alle chiamate in italiano." in pending
    unknown = MessageFacts(**{**facts("en").__dict__, "apartments": 0, "voice_language": None})
    live, pending = lines(unknown)
    assert live[2].startswith("It knows the house manual of your apartments:")
    assert "The phone assistant, answering your guests' calls." in pending
    assert all("{" not in line for line in live + pending)
    german = MessageFacts(**{**facts("en").__dict__, "voice_language": "de"})
    assert "answering calls in German" in lines(german)[1][1]


def test_without_a_sign_in_address_the_message_still_says_how_to_sign_in() -> None:
    text, html = render(MessageFacts(**{**facts("en").__dict__, "login_url": ""}), Settings())
    sentence = (
        "Sign in with owner@lakeside.example; we sent you a separate e-mail with a link to "
        "choose your password."
    )
    assert sentence in text and sentence in words(html)
    assert 'href=""' not in html


def test_what_the_customer_file_says_is_escaped_in_the_html() -> None:
    text, html = render(
        MessageFacts(**{**facts("en").__dict__, "customer_name": "<b>Casa</b> & Co"}),
        Settings(),
    )
    assert "&lt;b&gt;Casa&lt;/b&gt; &amp; Co" in html
    assert "<b>Casa</b> & Co" in text


@pytest.mark.parametrize("name", ["onboarding_message.txt.j2", "onboarding_message.html.j2"])
def test_the_templates_have_no_untranslated_text(name: str) -> None:
    source = (TEMPLATES_DIR / name).read_text()
    assert bare_text(mail_environment(), source) == []


# --- the baseline --------------------------------------------------------------------------------


async def enrolled_through_step_5(ctx: OnboardingContext) -> None:
    await apply_workspace_configuration(ctx)
    await apply_notion_integration(ctx)
    await apply_workspace(ctx)


async def test_the_baseline_is_the_assistants_usage(database_url: str, tmp_path: Path) -> None:
    async with onboarding_sandbox(database_url, tmp_path) as box:
        ctx = box.services.context(box.file())
        await enrolled_through_step_5(ctx)
        customer = await ctx.customer_context()
        assert customer.workspace_id is not None
        box.sandbox.assistant.add_traffic(customer.workspace_id, messages=12, tool_calls=5)

        baseline = await record_baseline(ctx)
        box.sandbox.assistant.add_traffic(customer.workspace_id, messages=1)
        again = await record_baseline(ctx)

    assert baseline.known and baseline.messages == 12 and baseline.tool_calls == 5
    assert baseline.usd_spent is not None and baseline.usd_spent > Decimal(0)
    assert baseline.workspace_id == customer.workspace_id
    assert again == baseline  # recorded once


async def test_without_a_usage_api_the_baseline_is_unknown_with_the_reason_not_zeros(
    database_url: str, tmp_path: Path
) -> None:
    async with onboarding_sandbox(database_url, tmp_path) as box:
        ctx = box.services.context(box.file())
        await enrolled_through_step_5(ctx)
        box.sandbox.assistant.configure(undocumented_endpoints="absent")

        baseline = await record_baseline(ctx)
        stored = await box.services.customers.usage.baseline(box.student_id)

    assert not baseline.known
    assert (baseline.usd_spent, baseline.messages, baseline.tool_calls) == (None, None, None)
    assert baseline.details is not None
    assert "no usage API" in baseline.details["unknown_reason"]
    assert stored == baseline
