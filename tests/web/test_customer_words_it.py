"""What Python computes for a customer's page, read by an Italian in Rome (issue 22).

The answers, the to-dos, the sync in words, the activity grouped by day, the charts' words
and the words of an error page: real Italian sentences in the informal "tu", local times
of Europe/Rome (never UTC), plurals that agree with their number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pmsgate.errors import Forbidden, InvalidInput, NotFound, PmsgateError, Unauthorized
from pmsgate.i18n import use_locale
from pmsgate.storage.audit import AuditEventView
from pmsgate.storage.knowledge import SyncJobView
from pmsgate.storage.models import SyncJobKind
from pmsgate.web.auth import not_authenticated
from pmsgate.web.charts import Series, count_label, hourly_chart, time_chart, usd_label
from pmsgate.web.customer_events import event_text, group_events
from pmsgate.web.customer_pages import HOURLY_EMPTY, USAGE_EMPTY, console_charts
from pmsgate.web.customer_view import CustomerHome, customer_home, reconnect_words
from pmsgate.web.page_errors import page_error_words
from pmsgate.web.sync_words import error_words, explain_job
from pmsgate.web.users import LoginLinkRefused, TooManyLoginAttempts, invalid_credentials
from pmsgate.web.views import CustomerPage, Onboarding

# 19:40 UTC on 26 November is 20:40 in Rome (winter time, UTC+1).
FINISHED = datetime(2026, 11, 26, 19, 40, tzinfo=UTC)
VIEWER = "anna@esempio.it"


@pytest.fixture(autouse=True)
def italian_reader() -> Iterator[None]:
    """An Italian reader in Rome (as the default reader, said explicitly)."""
    with use_locale("it", "Europe/Rome"):
        yield


def job(
    kind: SyncJobKind = "commit",
    counters: dict[str, Any] | None = None,
    details: list[dict[str, Any]] | None = None,
) -> SyncJobView:
    return SyncJobView(
        id="job-1",
        student_id="stu-1",
        kind=kind,
        status="succeeded",
        progress_done=0,
        progress_total=0,
        counters=counters,
        report={"details": details or []},
        error_code=None,
        error=None,
        runner_id="runner",
        created_at=FINISHED - timedelta(minutes=2),
        started_at=FINISHED - timedelta(minutes=2),
        heartbeat_at=None,
        finished_at=FINISHED,
    )


def page(booking: str, *, live: bool = True, name: str = "Casa Bella") -> CustomerPage:
    """Just what customer_home reads of a page (a live assistant on Route A)."""
    outcomes = [SimpleNamespace(id="onboarding-message", status="done" if live else "todo")]
    checklist = SimpleNamespace(route="A", outcomes=outcomes)
    return cast(
        CustomerPage,
        SimpleNamespace(
            facility=SimpleNamespace(status=booking),
            ctx=SimpleNamespace(
                kross=None,
                hotel_id="hotel-1",
                notes_connected=True,
                customer=SimpleNamespace(name=name),
                apartments=["Blu"],
                student_id="stu-1",
            ),
            row=SimpleNamespace(onboarding=Onboarding(cast(Any, checklist))),
        ),
    )


def home(booking: str, jobs: list[SyncJobView], events: list[AuditEventView]) -> CustomerHome:
    return customer_home(page(booking), jobs=jobs, events=events, sync_open=True, viewer=VIEWER)


def event(action: str, when: datetime, **details: Any) -> AuditEventView:
    return AuditEventView(
        id=1,
        occurred_at=when,
        actor_kind="customer_user",
        actor=VIEWER,
        action=action,
        subject="customer:stu-1",
        outcome="success",
        customer_id=1,
        facility_id=None,
        request_id="req",
        client_address=None,
        details=details,
    )


# --- the answers and the to-dos -----------------------------------------------------------------


def test_the_booking_answer_when_disconnected_is_italian_and_says_what_to_do() -> None:
    page_words = home("error", [job(counters={"apartments": 2})], [])
    answers = {a.key: a for a in page_words.answers}
    booking = answers["booking"]
    assert booking.question == "Il tuo gestionale è collegato?"
    assert (booking.tone, booking.headline) == ("bad", "No — il collegamento è interrotto")
    assert booking.detail == (
        "Il gestionale ha rifiutato il nostro accesso, di solito perché la password API è "
        "stata cambiata. Inserisci le nuove credenziali nel modulo qui sotto per ricollegarlo."
    )
    assert answers["assistant"].headline == "Attivo, ma non vede le tue prenotazioni"
    assert answers["knowledge"].question == "Le conoscenze del tuo assistente sono aggiornate?"
    assert answers["knowledge"].headline == "In pausa"
    first = page_words.todos[0]
    assert (first.who, first.anchor) == ("you", "reconnect")
    assert first.text == (
        "Ricollega il tuo gestionale: inserisci la password API attuale nel modulo di "
        "questa pagina."
    )


def test_the_last_update_is_told_in_rome_time_never_utc() -> None:
    answers = {a.key: a for a in home("connected", [job(counters={"apartments": 1})], []).answers}
    knowledge = answers["knowledge"]
    assert (knowledge.tone, knowledge.headline) == ("ok", "Sì")
    assert knowledge.detail == (
        "Ultimo aggiornamento: 26 nov 2026, 20:40. Quando modifichi le tue note, aggiorna di nuovo."
    )
    assert "UTC" not in knowledge.detail and "19:40" not in knowledge.detail
    with use_locale("it", "America/New_York"):
        other = {a.key: a for a in home("connected", [job()], []).answers}["knowledge"]
    assert "26 nov 2026, 14:40" in other.detail


def test_nothing_to_do_and_the_name_of_an_account_without_one() -> None:
    words = home("connected", [job(counters={"apartments": 1})], [])
    assert words.name == "Casa Bella"
    assert [t.text for t in words.todos] == ["Niente da fare — è tutto in ordine."]
    assert words.route_b_sentence.startswith("Il tuo assistente legge disponibilità, prezzi")
    unnamed = customer_home(
        page("connected", name=""), jobs=[], events=[], sync_open=True, viewer=None
    )
    assert unnamed.name == "Il tuo account"


# --- the sync in words --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("apartments", "checked", "found"),
    [
        (
            1,
            "1 appartamento controllato; non è cambiato nulla.",
            "Il controllo ha trovato 1 appartamento, ma non si può abbinare al tuo gestionale "
            "finché il collegamento è interrotto.",
        ),
        (
            3,
            "3 appartamenti controllati; non è cambiato nulla.",
            "Il controllo ha trovato 3 appartamenti, ma nessuno si può abbinare al tuo "
            "gestionale finché il collegamento è interrotto.",
        ),
    ],
)
def test_a_check_agrees_with_its_number_of_apartments(
    apartments: int, checked: str, found: str
) -> None:
    clean = explain_job(job("dry_run", {"apartments": apartments}), "connected")
    assert (clean.tone, clean.headline) == ("ok", "Controllo finito: tutto pronto per aggiornare")
    assert clean.lines == [checked, "Ogni pagina di note segue il modello."]
    counters = {"apartments": apartments, "unresolvedApartments": apartments}
    down = explain_job(job("dry_run", counters), "error")
    assert down.headline == "Non si può aggiornare nulla finché non ricolleghi il tuo gestionale"
    assert down.lines[0] == found


def test_an_update_with_problems_names_the_apartments_and_the_italian_sections() -> None:
    counters = {
        "apartments": 3,
        "created": 1,
        "updated": 4,
        "unchanged": 7,
        "deleted": 0,
        "blockedByTemplate": 1,
        "directoriesCreated": 1,
    }
    details = [
        {"name": "Casa Rossa", "status": "blocked_by_template", "notesPageId": "p"}
        | {"missingSections": ["wifi", "house_rules"]},
        {"name": "Verde", "unresolvedReason": "listing_not_active", "templateComplete": True},
    ]
    explained = explain_job(job(counters=counters, details=details), "connected")
    assert explained.headline == "Aggiornamento finito, con problemi da sistemare"
    assert explained.lines == [
        "Aggiornamento fatto su 3 appartamenti.",
        "Informazioni nuove: 1; modificate: 4; già aggiornate: 7.",
        "1 appartamento ha per la prima volta una sua sezione.",
        "1 appartamento è stato saltato perché la sua pagina di note è incompleta — vedi qui "
        "sotto cosa sistemare. Le sue conoscenze di prima restano.",
        "Abbiamo saltato Verde: il suo annuncio non è attivo nel tuo gestionale.",
    ]
    assert explained.fixes == [
        "Casa Rossa: aggiungi le sezioni mancanti “WiFi” e “Regole della casa” alla sua "
        "pagina di note (usa i titoli del modello)."
    ]


def test_error_and_reconnect_words_are_italian() -> None:
    assert error_words("sync_cancelled") == (
        "L'ultimo aggiornamento è stato fermato prima della fine. Avvialo di nuovo."
    )
    assert error_words("something_new").startswith("Non è stato possibile finire")
    assert "Impostazioni → API" in reconnect_words("pms_credentials_rejected")
    assert reconnect_words(None).startswith("Non siamo riusciti a raggiungere il tuo gestionale")


# --- the activity -------------------------------------------------------------------------------


def test_events_are_italian_sentences_for_you_and_for_someone_else() -> None:
    mine = event("signin.succeeded", FINISHED)
    assert event_text(mine, viewer=VIEWER).text == "Hai fatto l'accesso alla console."
    assert event_text(mine, viewer="marco@esempio.it").text == (
        "anna@esempio.it ha fatto l'accesso alla console."
    )
    sync = event("console.action", FINISHED, operation="knowledge.sync", commit=True)
    team = replace(sync, actor_kind="admin")
    assert event_text(team).text == "Il nostro team ha avviato un aggiornamento delle conoscenze."
    lost = event_text(event("facility.status_changed", FINISHED, to="error"))
    assert (lost.text, lost.tone) == (
        "Il gestionale ha smesso di accettare il nostro accesso (collegamento perso).",
        "bad",
    )
    refused = replace(event("credentials.changed", FINISHED), outcome="refused")
    assert event_text(refused).text.startswith("Sono state provate nuove credenziali")


def test_the_activity_is_grouped_by_day_in_rome_with_repeats_told_once() -> None:
    late = datetime(2026, 11, 12, 22, 50, tzinfo=UTC)  # 23:50 on 12 November in Rome
    setup = [
        replace(event("onboarding.side_effect", late - timedelta(minutes=i)), actor_kind="job")
        for i in range(10)
    ]
    events = [
        event("signin.succeeded", late + timedelta(minutes=20)),  # 00:10 on 13 November
        *setup,
        event("facility.status_changed", late - timedelta(hours=3), to="connected"),
    ]
    words = home("connected", [job(counters={"apartments": 1})], events)
    assert len(words.events) == 12  # the flat list stays as it was
    days = words.event_days
    assert [(d.day, d.day_label) for d in days] == [
        (date(2026, 11, 13), "13 novembre 2026"),
        (date(2026, 11, 12), "12 novembre 2026"),
    ]
    assert [(i.time_label, i.text) for i in days[0].items] == [
        ("00:10", "Hai fatto l'accesso alla console.")
    ]
    assert [(i.time_label, i.text, i.count, i.tone) for i in days[1].items] == [
        ("23:50", "La configurazione ha fatto 10 modifiche al tuo account.", 10, "info"),
        ("20:50", "Il collegamento con il gestionale funziona.", 1, "ok"),
    ]
    one = group_events([event_text(setup[0])])
    assert one[0].items[0].text == (
        "Un passaggio della configurazione ha fatto una modifica al tuo account."
    )


# --- the charts ---------------------------------------------------------------------------------


def test_the_charts_speak_italian_in_rome_time() -> None:
    assert count_label(1200) == "1.200" and count_label(2.5) == "2,5"
    assert usd_label(12.5) == "12,50 $"
    times = [FINISHED, FINISHED + timedelta(hours=6), FINISHED + timedelta(hours=12)]
    chart = time_chart(
        "Utilizzo",
        times,
        [Series("messaggi degli ospiti", [0, 12, 30])],
        unit="totale",
        empty="Niente.",
    )
    assert chart.summary == (
        "3 rilevazioni dal 26 nov 20:40 al 27 nov 08:40; ultimi valori: messaggi degli ospiti: 30."
    )
    assert chart.svg is not None and "orario (Roma)" in chart.svg and "UTC" not in chart.svg
    hours = [FINISHED.replace(minute=0) - timedelta(hours=47 - i) for i in range(48)]
    bars = hourly_chart("Ore", hours, [Series("ricerche", [1] * 48)], unit="x", empty="Niente.")
    assert bars.summary == "Totali nelle ore mostrate: ricerche: 48."
    assert bars.svg is not None and re.search(r">\d\d nov 18:00<", bars.svg)


def test_the_customers_charts_have_italian_titles_and_empty_states() -> None:
    empty = SimpleNamespace(snapshots=[], hours=[])
    usage, cost, hourly = console_charts(cast(CustomerPage, empty))
    assert (usage.title, cost.title) == ("Utilizzo dall'attivazione", "Spesa dall'attivazione")
    assert hourly.title.startswith("Ricerche dell'assistente e richieste al gestionale")
    assert usage.empty.startswith("Ancora nessun utilizzo") and usage.empty != USAGE_EMPTY
    assert hourly.empty == "Nessuna ricerca dell'assistente nelle ultime 48 ore."
    assert HOURLY_EMPTY == "No assistant lookups in the last 48 hours."  # the msgid
    # The figures keep their English test ids whatever the language.
    assert usage.key == "usage-since-onboarding"


# --- the words of an error page -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "message", "hint"),
    [
        (
            invalid_credentials(),
            "L'indirizzo e-mail o la password non sono corretti.",
            "Controllali entrambi e accedi di nuovo. Dopo vari tentativi sbagliati l'accesso si "
            "blocca per qualche minuto.",
        ),
        (
            TooManyLoginAttempts(90),
            "Troppi accessi sbagliati: l'accesso è in pausa per un po'.",
            "Riprova tra 2 minuti, oppure scegli una nuova password con “Hai dimenticato la "
            "password?”.",
        ),
        (
            TooManyLoginAttempts(20),
            "Troppi accessi sbagliati: l'accesso è in pausa per un po'.",
            "Riprova tra 1 minuto, oppure scegli una nuova password con “Hai dimenticato la "
            "password?”.",
        ),
        (LoginLinkRefused("used"), "Questo link è già stato usato.", None),
        (LoginLinkRefused("expired"), "Questo link è scaduto.", None),
        (LoginLinkRefused("whatever"), "Questo link non è valido.", None),
        (
            not_authenticated(),
            "Non hai fatto l'accesso, oppure la tua sessione è scaduta.",
            "Accedi di nuovo per continuare.",
        ),
        (
            Forbidden("A customer account can see only its own customer.", code="forbidden"),
            "Il tuo account non può aprire questa pagina.",
            "Se pensi che dovrebbe, accedi con l'account giusto oppure scrivici.",
        ),
        (
            NotFound("No customer with student_id stu-9.", code="customer_not_found"),
            "Non abbiamo trovato questo account.",
            "Controlla l'indirizzo della pagina, oppure torna alla tua pagina.",
        ),
        (
            Forbidden("The request did not carry this session's CSRF token.", code="csrf_failed"),
            "Questa pagina non era aggiornata, quindi non è stato inviato nulla.",
            "Ricarica la pagina e riprova.",
        ),
        (
            PmsgateError("Redis is unreachable.", code="shared_state_unavailable", status=503),
            "Il nostro servizio ha un piccolo problema in questo momento.",
            "Aspetta qualche secondo e riprova.",
        ),
        (
            NotFound("Not Found"),
            "Questa pagina non esiste.",
            "Controlla l'indirizzo della pagina, oppure torna alla tua pagina.",
        ),
    ],
)
def test_page_errors_are_italian(error: PmsgateError, message: str, hint: str | None) -> None:
    said, advice = page_error_words(error)
    assert said == message
    if hint is not None:
        assert advice == hint
    else:
        assert advice is not None and advice.startswith("Ogni link funziona una volta sola.")


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (InvalidInput("frobnicate_id must be set.", code="frobnicate_missing"), "Non è stato"),
        (Unauthorized("Send `Authorization: Bearer <key>`."), "Non hai fatto l'accesso"),
        (Forbidden("Only admins.", code="admin_only"), "Il tuo account non può aprire"),
        (PmsgateError("An unexpected error occurred."), "Qualcosa è andato storto"),
        (PmsgateError("Upstream said 502.", code="upstream_down", status=502), "Qualcosa è"),
        (PmsgateError("Slow down.", code="rate_limited", status=429), "Troppi tentativi"),
    ],
)
def test_an_unknown_error_reads_a_generic_sentence_never_its_english(
    error: PmsgateError, message: str
) -> None:
    said, advice = page_error_words(error)
    assert said.startswith(message) and advice
    assert error.message not in said and error.message not in advice
    assert error.code not in said + advice


def test_page_errors_in_english_too() -> None:
    with use_locale("en"):
        assert page_error_words(TooManyLoginAttempts(121)) == (
            "Too many wrong sign-ins: signing in is paused for a while.",
            "Try again in 2 minutes, or choose a new password with “Forgot your password?”.",
        )
        assert page_error_words(LoginLinkRefused("expired"))[0] == "This link has expired."
        assert page_error_words(PmsgateError("boom"))[0] == "Something went wrong on our side."
