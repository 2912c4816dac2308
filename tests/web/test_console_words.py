"""The customer's console in its reader's language: Italian and English words, the brand,
the language switch, times in the reader's zone, the reconnect's result first, the
registry in apartment names, the activity as a CSV download.
"""

from __future__ import annotations

import csv
import io
import re

import httpx
import pytest

from tests.customers.test_registry_check import FOUR_APARTMENTS, swap_mapping
from tests.web.support import WebSandbox, login, post_reconnect, web_sandbox
from tests.web.test_customer_console import visible_text

pytestmark = pytest.mark.anyio

BRAND = "Ospiti Felici"
SUPPORT_EMAIL = "aiuto@ospitifelici.example"
SETTINGS = {"brand_name": BRAND, "support_email": SUPPORT_EMAIL}
ITALIAN = {"Accept-Language": "it-IT,it;q=0.9"}
HTMX = {"HX-Request": "true"}
# Words of these templates that must not be left in English on an Italian page (words that
# Python computes, such as the charts' titles, are translated where they are made).
ENGLISH_WORDS = (
    "Sign out",
    "Booking system",
    "What to do now",
    "Your assistant at a glance",
    "Recent activity",
    "See all activity",
    "API password",
    "API user",
    "For your technician",
    "Apartments and their listings",
    "pmsgate",
)


async def signed_in_as_customer(
    web: WebSandbox, headers: dict[str, str]
) -> tuple[httpx.AsyncClient, str]:
    email, password = await web.add_user("customer")
    client = await web.new_client()
    client.headers.update(headers)
    return client, await login(client, email, password)


async def test_an_italian_reader_gets_the_page_in_italian_with_the_brand(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, settings_overrides=SETTINGS) as web:
        client, _ = await signed_in_as_customer(web, ITALIAN)
        page = await client.get(f"/console/customers/{web.student_id}")
        assert page.status_code == 200, page.text
        html, text = page.text, visible_text(page.text)
        assert '<html lang="it">' in html
        assert re.search(rf"<title>[^<]*· {BRAND}</title>", html)
        left = [word for word in ENGLISH_WORDS if word in text]
        assert not left, f"English on the Italian page: {left}"
        for italian in ("Gestionale delle prenotazioni", "Cosa fare adesso", "Esci", "ora di Roma"):
            assert italian in text
        assert '<h2 id="usage-title">Utilizzo</h2>' in html
        assert re.search(r'data-testid="sync-dry-run"[^>]*>Controlla le mie note<', html)
        # The API user is explained where it is asked for.
        assert "Impostazioni → API" in text
        # The language switch comes back to this page.
        assert 'action="/language"' in html
        assert f'name="next" value="/console/customers/{web.student_id}"' in html
        assert re.search(r'value="it"[^>]*aria-current="true" disabled', html)
        # The keys are folded away for a technician.
        assert "Per il tuo tecnico" in text

        english = await client.get(
            f"/console/customers/{web.student_id}", headers={"Accept-Language": "en"}
        )
        assert '<html lang="en">' in english.text
        assert "Booking system" in visible_text(english.text)
        assert "For your technician" in visible_text(english.text)


async def test_the_sign_in_page_has_the_brand_the_switch_and_the_support_contact(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, settings_overrides=SETTINGS) as web:
        page = await web.client.get("/login", headers=ITALIAN)
        text = visible_text(page.text)
        assert f"Accedi a {BRAND}" in text and "pmsgate" not in text
        assert "Password" not in text  # the label reads "La tua password"
        assert f'href="mailto:{SUPPORT_EMAIL}"' in page.text
        assert 'href="/login/forgot"' in page.text
        assert 'data-testid="language-switch"' in page.text

        expired = await web.client.get("/login", params={"expired": "1"}, headers=ITALIAN)
        assert 'data-testid="login-expired"' in expired.text


async def test_an_admins_pages_stay_english_without_the_switch(database_url: str) -> None:
    async with web_sandbox(database_url, settings_overrides=SETTINGS) as web:
        admin, _ = await web.signed_in("admin")
        page = await admin.get(f"/console/customers/{web.student_id}", headers=ITALIAN)
        assert page.status_code == 200, page.text
        assert '<html lang="en">' in page.text
        assert 'data-testid="language-switch"' not in page.text
        assert "pmsgate</a>" in page.text


async def test_the_reconnect_result_comes_first_in_the_panel(web: WebSandbox) -> None:
    await web.enrolled.break_kross()
    client, token = await signed_in_as_customer(web, {})
    facility = web.enrolled.facility
    refused = await client.post(
        f"/console/customers/{web.student_id}/reconnect",
        data={"csrf_token": token, "username": facility["username"], "password": "wrong"},
        headers=HTMX,
    )
    panel = refused.text
    assert panel.index('id="reconnect-result"') < panel.index('id="reconnect"')
    assert 'data-testid="reconnect-error"' in panel and 'tabindex="-1"' in panel
    # The password break_kross set.
    done = await post_reconnect(web, client, token, f"{facility['password']}-changed", headers=HTMX)
    panel = done.text
    heading = panel.index('id="pms-title"')
    result = panel.index('data-testid="reconnect-result"')
    assert heading < result < panel.index('data-testid="pms-status"')
    assert result < panel.index("<form")
    assert "connected again" in visible_text(panel)


async def test_a_customer_reads_apartment_names_not_room_type_numbers(database_url: str) -> None:
    async with web_sandbox(database_url, student_index=FOUR_APARTMENTS) as web:
        first, _second = await swap_mapping(web.enrolled)
        client, token = await signed_in_as_customer(web, {})
        base = f"/console/customers/{web.student_id}/registry"
        panel = (await client.post(f"{base}/check", data={"csrf_token": token}, headers=HTMX)).text
        # (The problems' reasons, written in Python, may still name a room type.)
        assert '<span class="muted">(room type' not in panel and ">room type<" not in panel
        assert 'data-label="Apartment"' in panel
        names = {str(a["id_room_type"]): a["name"] for a in web.enrolled.facility["apartments"]}
        assert names[first] in panel

        admin, admin_token = await web.signed_in("admin")
        shown = await admin.post(f"{base}/check", data={"csrf_token": admin_token}, headers=HTMX)
        assert f'<span class="muted">(room type {first})' in shown.text


async def test_a_customer_downloads_its_activity_as_csv_in_its_words(web: WebSandbox) -> None:
    client, _ = await signed_in_as_customer(web, ITALIAN)
    page = await client.get("/console/audit")
    assert 'href="/console/audit/export.csv"' in page.text
    assert "JSON" not in visible_text(page.text)
    assert "Scarica (CSV)" in visible_text(page.text)

    export = await client.get("/console/audit/export.csv")
    assert export.status_code == 200
    assert export.headers["content-type"].startswith("text/csv")
    assert 'filename="activity.csv"' in export.headers["content-disposition"]
    body = export.content.decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(body), delimiter=";"))
    assert rows[0] == ["Quando (ora di Roma)", "Cosa è successo"]
    assert len(rows) >= 2 and all(len(row) == 2 for row in rows)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", rows[1][0])

    english = await client.get(
        "/console/audit/export.jsonl",
        params={"format": "csv"},
        headers={"Accept-Language": "en"},
    )
    rows = list(csv.reader(io.StringIO(english.content.decode("utf-8-sig"))))
    assert rows[0] == ["When (Rome time)", "What happened"]

    admin, _ = await web.signed_in("admin")
    admin_rows = list(
        csv.reader(io.StringIO((await admin.get("/console/audit/export.csv")).text[1:]))
    )
    assert admin_rows[0][:3] == ["occurred_at", "action", "outcome"]
    assert any(row[1] == "signin.succeeded" for row in admin_rows[1:])
