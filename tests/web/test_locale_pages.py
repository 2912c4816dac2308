"""Which language and time zone a page is in: the switch, the customer's setting, the browser.

Through HTTP: the order of docs/i18n.md (the switch, then the customer's setting, then
``Accept-Language``, then Italian), admins always English, ``<html lang>`` right, and
times in the customer's own time zone.
"""

from __future__ import annotations

import re
from dataclasses import replace

import httpx
import pytest

from tests.customers.support import profile_of
from tests.web.support import WebSandbox, login, web_sandbox

pytestmark = pytest.mark.anyio


def lang_of(page: httpx.Response) -> str:
    found = re.search(r'<html lang="([a-z]+)"', page.text)
    assert found, page.text[:200]
    return found.group(1)


async def set_customer(web: WebSandbox, **changes: str) -> None:
    await web.web.customers.customers.upsert(replace(profile_of(web.enrolled.facility), **changes))


@pytest.fixture
async def web(database_url: str):  # type: ignore[no-untyped-def]
    async with web_sandbox(database_url, with_notion=False, sync=False) as sandbox:
        yield sandbox


async def test_without_a_session_the_browser_decides_and_italian_is_the_default(
    web: WebSandbox,
) -> None:
    client = await web.new_client()
    client.headers.pop("Accept-Language")
    assert lang_of(await client.get("/login")) == "it"
    page = await client.get("/login", headers={"Accept-Language": "fr-FR,en;q=0.5"})
    assert lang_of(page) == "en" and "Sign in" in page.text
    page = await client.get("/login", headers={"Accept-Language": "it-IT,en;q=0.5"})
    assert lang_of(page) == "it" and "Accedi" in page.text


async def test_the_customers_setting_beats_the_browser_and_the_switch_beats_both(
    web: WebSandbox,
) -> None:
    await set_customer(web, language="it")
    address, password = await web.add_user("customer")
    client = await web.new_client()  # an English browser
    await login(client, address, password)
    own = f"/console/customers/{web.student_id}"
    page = await client.get(own)
    assert lang_of(page) == "it" and "Cosa fare adesso" in page.text

    switched = await client.post("/language", data={"language": "en", "next": own})
    assert switched.status_code == 303 and switched.headers["location"] == own
    page = await client.get(own)
    assert lang_of(page) == "en" and "What to do now" in page.text

    # Only a local path is followed; an unknown language changes nothing.
    away = await client.post("/language", data={"language": "de", "next": "https://evil.example"})
    assert away.headers["location"] == "/console"
    assert lang_of(await client.get(own)) == "en"


async def test_an_admin_reads_english_whatever_the_browser(web: WebSandbox) -> None:
    admin, _ = await web.signed_in("admin")
    page = await admin.get("/console", headers={"Accept-Language": "it-IT"})
    assert lang_of(page) == "en"
    assert 'action="/language"' not in page.text  # no switch on the team's pages


async def test_times_are_in_the_customers_time_zone(web: WebSandbox) -> None:
    address, password = await web.add_user("customer")
    client = await web.new_client()
    await login(client, address, password)  # an event at the clock's "now"
    now = web.enrolled.clock.now()
    own = f"/console/customers/{web.student_id}"

    await set_customer(web, language="en", timezone="America/New_York")
    new_york = (await client.get(own)).text
    await set_customer(web, language="en", timezone="Europe/Rome")
    rome = (await client.get(own)).text
    # The activity's time of day: the same moment, read in each zone.
    from zoneinfo import ZoneInfo

    assert f">{now.astimezone(ZoneInfo('America/New_York')):%H:%M}</time>" in new_york
    assert f">{now.astimezone(ZoneInfo('Europe/Rome')):%H:%M}</time>" in rome
    assert "UTC" not in rome
