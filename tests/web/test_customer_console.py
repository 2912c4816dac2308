"""A customer's own console page in plain language (issue 16 item 3), through HTTP.

Each state a customer can be in — booking system connected, in error or unverified;
Route A or B; the knowledge sync never run, running, finished, blocked by a template,
a dry run while the connection is down; off the allowlist — is rendered and read for
its words, and every page is checked for what a customer must never see: its student
id, workspace slug, the facility's id, step ids, error codes, camelCase counter names,
``partner_markup`` and command lines.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from html.parser import HTMLParser

import httpx
import pytest

from pmsgate.customers.service import link_kross
from tests.gateway.facility_support import new_facility_from_seed
from tests.web.support import (
    WebSandbox,
    post_reconnect,
    post_sync,
    record_route,
    sync_form,
    web_sandbox,
)

pytestmark = pytest.mark.anyio

# Words of the admin's world: never on a customer's page.
INTERNAL_WORDS = (
    "partner_markup",
    "pmsgate ",
    "unresolvedApartments",
    "incompleteTemplates",
    "blockedByTemplate",
    "directoriesCreated",
    "syncFolderCreated",
    "nodesTotal",
    "onboarding-message",
    "route-choice",
    "knowledge-commit",
    "knowledge-dry-run",
    "route-b-quick-setup",
    "pms_integration_error",
    "pms_auth_failed",
    "not_on_allowlist",
    "notes_not_connected",
    "Route A",
    "Route B",
    "dry_run",
    "student_id",
    "workspace_id",
    "hotel_id",
)
_CAMEL = re.compile(r"\b[a-z]+[A-Z][A-Za-z]*\b")


class _Text(HTMLParser):
    """The text a person reads (and the title), without tags, attributes or scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def visible_text(html: str) -> str:
    """The page's text with runs of whitespace as one space."""
    parser = _Text()
    parser.feed(html)
    return re.sub(r"\s+", " ", " ".join(parser.parts))


def assert_plain(web: WebSandbox, html: str) -> str:
    """No internal word in the page's text (ids, codes, counters, commands); the text."""
    text = visible_text(html)
    internal = [
        *INTERNAL_WORDS,
        web.student_id,
        web.assistant,  # the workspace slug
        web.hotel_id,
    ]
    found = [word for word in internal if word in text]
    assert not found, f"internal words on a customer's page: {found}"
    # A key's display prefix (<code>, e.g. "pgk_vCAeKf…") is random text, not a counter name.
    camel = _CAMEL.findall(visible_text(re.sub(r"<code\b[^>]*>.*?</code>", "", html, flags=re.S)))
    assert not camel, f"camelCase words on a customer's page: {camel}"
    return text


async def customer_page(web: WebSandbox, client: httpx.AsyncClient) -> tuple[str, str]:
    """The customer's page (HTML, text), checked for internal words."""
    answer = await client.get(f"/console/customers/{web.student_id}")
    assert answer.status_code == 200, answer.text
    return answer.text, assert_plain(web, answer.text)


def tone_of(html: str, key: str) -> str:
    """The tone of one of the page's answers (ok, warn, bad, busy, info)."""
    found = re.search(rf'data-testid="answer-{key}" data-tone="(\w+)"', html)
    assert found, f"no answer {key}"
    return found.group(1)


async def run_sync(web: WebSandbox, client: httpx.AsyncClient, token: str, *, commit: bool) -> None:
    """Start a sync from the page (as the form does) and wait until it has finished."""
    answer = await client.post(
        f"/console/customers/{web.student_id}/sync",
        data=sync_form(web, client, commit="true" if commit else "false", csrf_token=token),
    )
    assert answer.status_code == 303, answer.text
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None
    await web.web.sync_jobs.wait(job.id)


async def test_connected_and_never_synced_says_so_and_what_to_do(web: WebSandbox) -> None:
    client, _ = await web.signed_in("customer")
    html, text = await customer_page(web, client)
    assert "Is my assistant live?" in text
    assert "Is my booking system connected?" in text
    assert "Is my knowledge up to date?" in text
    assert "What to do now" in text
    assert tone_of(html, "booking") == "ok" and "Yes, connected" in text
    assert tone_of(html, "knowledge") == "warn" and "Not loaded yet" in text
    assert "Not yet — set-up has not started" in text
    assert "Check your apartment notes, then load them into your assistant" in text
    assert 'data-testid="sync-never"' in html
    assert "Check my notes" in text and "Update knowledge" in text
    assert 'id="reconnect"' in html
    assert "Nothing recorded yet." in text or 'data-testid="event"' in html
    assert 'href="/console/audit"' in html
    # The detailed page's parts are not there.
    assert 'data-testid="checklist"' not in html and "sync-counters" not in html


async def test_a_connection_in_error_puts_reconnecting_first(web: WebSandbox) -> None:
    await web.enrolled.break_kross()
    client, _ = await web.signed_in("customer")
    html, text = await customer_page(web, client)
    assert tone_of(html, "booking") == "bad"
    assert "No — the connection is down" in text
    first = re.search(r'<li data-testid="todo" data-who="(\w+)">(.*?)</li>', html, re.DOTALL)
    assert first and first.group(1) == "you"
    assert 'href="#reconnect"' in first.group(2) and "Reconnect your booking system" in text
    assert re.search(r'<div id="reconnect">\s*<form', html)
    assert "Your booking system stopped accepting our sign-in." in text
    assert tone_of(html, "knowledge") == "warn" and "Nothing can sync until you" in text


async def test_a_dry_run_while_the_connection_is_down_is_a_warning_not_a_success(
    web: WebSandbox,
) -> None:
    await web.enrolled.break_kross()
    client, token = await web.signed_in("customer")
    await run_sync(web, client, token, commit=False)
    html, text = await customer_page(web, client)
    job = re.search(r'data-testid="sync-job"[^>]*data-tone="(\w+)"', html)
    assert job and job.group(1) == "warn"
    assert "Nothing can sync until you reconnect your booking system" in text
    apartments = len(web.enrolled.facility["apartments"])
    assert f"found {apartments} apartments, but none can be matched" in text
    assert "succeeded" not in text and "Check finished: ready to update" not in text


async def test_an_unverified_connection_is_said_to_be_unconfirmed(database_url: str) -> None:
    async with web_sandbox(database_url, register_facility=False) as web:
        facility = web.enrolled.facility
        row = await link_kross(web.web.customers, web.student_id, web.hotel_id)
        await web.gateway.facilities.add(
            new_facility_from_seed(facility, integration_id=row.id),
            unverified=True,
        )
        await link_kross(web.web.customers, web.student_id, web.hotel_id)
        client, _ = await web.signed_in("customer")
        html, text = await customer_page(web, client)
        assert tone_of(html, "booking") == "warn"
        assert "Saved, not confirmed yet" in text
        assert 'data-state="unverified"' in html


async def test_a_dry_run_explains_the_incomplete_templates_and_how_to_fix_them(
    web: WebSandbox,
) -> None:
    client, token = await web.signed_in("customer")
    await run_sync(web, client, token, commit=False)
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None and job.counters is not None
    incomplete = job.counters["incompleteTemplates"]
    _, text = await customer_page(web, client)
    apartments = len(web.enrolled.facility["apartments"])
    assert f"{apartments} apartments checked; nothing was changed." in text
    if incomplete:
        assert "Check finished: some things to fix before updating" in text
        assert "What to fix in your notes:" in text
        fixes = re.findall(r"add the missing sections? (.*?) to its notes page", text)
        no_page = "has no notes page yet" in text
        assert fixes or no_page
        assert "Fix a notes page" in text  # and it is on the to-do list
    else:
        assert "Check finished: ready to update" in text
    assert "You started a check of the notes." in text


async def test_a_commit_is_told_in_words(web: WebSandbox) -> None:
    client, token = await web.signed_in("customer")
    await run_sync(web, client, token, commit=True)
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None and job.status == "succeeded" and job.counters is not None
    html, text = await customer_page(web, client)
    created = job.counters["created"]
    added = rf"{created} new pieces? of knowledge added, \d+ updated, \d+ already up to date"
    assert re.search(added, text)
    blocked = job.counters["blockedByTemplate"]
    if blocked:
        assert "Update finished with problems to fix" in text
        assert f"{blocked} apartment" in text and "skipped because" in text
        assert tone_of(html, "knowledge") == "warn"
    else:
        assert "Update finished: all done" in text
        assert tone_of(html, "knowledge") == "ok"
    assert "You started an update of the knowledge." in text


async def test_a_running_sync_shows_its_progress_in_words(web: WebSandbox) -> None:
    client, token = await web.signed_in("customer")
    web.sleep.close()  # hold the sync at its first throttle wait
    started = await post_sync(web, client, token, commit=True, htmx=True)
    assert started.status_code == 200
    assert "Updating your assistant's knowledge…" in visible_text(started.text)
    html, text = await customer_page(web, client)
    assert tone_of(html, "knowledge") == "busy" and "Updating now" in text
    assert 'data-testid="sync-progress"' in html
    web.sleep.open()
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None
    await web.web.sync_jobs.wait(job.id)


async def test_route_b_has_no_sync_and_says_what_applies_instead(web: WebSandbox) -> None:
    await record_route(web, "B", live=True)
    client, _ = await web.signed_in("customer")
    html, text = await customer_page(web, client)
    assert 'data-testid="sync-dry-run"' not in html and 'data-testid="sync-commit"' not in html
    assert 'data-testid="knowledge-route-b"' in html
    assert "answers from your booking system directly" in text
    assert tone_of(html, "assistant") == "ok" and "Yes, it is live" in text
    assert "Nothing to do — everything is in order." in text


async def test_a_live_assistant_with_the_connection_down_is_a_warning(web: WebSandbox) -> None:
    await record_route(web, "A", live=True)
    await web.enrolled.break_kross()
    client, _ = await web.signed_in("customer")
    html, text = await customer_page(web, client)
    assert tone_of(html, "assistant") == "warn"
    assert "Live, but it cannot see your bookings" in text


async def test_a_sync_refused_from_the_page_is_said_in_words(database_url: str) -> None:
    async with web_sandbox(database_url, with_notion=False) as web:
        client, token = await web.signed_in("customer")
        answer = await post_sync(web, client, token, commit=True)
        assert answer.status_code == 409
        text = assert_plain(web, answer.text)
        assert "Your apartment notes are not connected yet." in text
        assert "connect-notion" not in answer.text  # the admin's hint (a command) is not shown


async def test_a_customer_off_the_allowlist_sees_a_plain_message_and_no_buttons(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, allowlisted=False) as web:
        client, token = await web.signed_in("customer")
        html, text = await customer_page(web, client)
        assert 'data-testid="sync-closed"' in html
        assert 'data-testid="sync-commit"' not in html
        assert "Knowledge updates are not open to your account yet." in text
        refused = await post_sync(web, client, token, commit=True, htmx=True)
        assert refused.status_code == 200
        assert "Knowledge updates are not open to your account yet." in visible_text(refused.text)
        assert await web.web.sync_jobs.latest(web.student_id) is None
        # Added to the list: the buttons are there at once; removed: gone at once.
        ctx = await web.web.customers.context(web.student_id)
        await web.web.customers.allowlist.put(ctx.customer.email)
        html, _ = await customer_page(web, client)
        assert 'data-testid="sync-commit"' in html and 'data-testid="sync-closed"' not in html
        await web.web.customers.allowlist.remove(ctx.customer.email)
        html, _ = await customer_page(web, client)
        assert 'data-testid="sync-closed"' in html


async def test_a_fragment_opened_directly_is_the_whole_styled_page(web: WebSandbox) -> None:
    client, _ = await web.signed_in("customer")
    path = f"/console/customers/{web.student_id}"
    direct = await client.get(f"{path}/sync")
    assert direct.status_code == 303
    assert direct.headers["location"] == f"{path}#knowledge"
    page = await client.get(direct.headers["location"])
    assert page.status_code == 200
    assert "console.css" in page.text and page.text.lstrip().startswith("<!doctype html>")
    admin, _ = await web.signed_in("admin")
    assert (await admin.get(f"{path}/sync")).status_code == 303
    fragment = await client.get(f"{path}/sync", headers={"HX-Request": "true"})
    assert fragment.text.lstrip().startswith('<section class="card" id="knowledge"')
    # The customer's summary comes along, to be swapped out of band.
    assert '<div id="status" hx-swap-oob="true">' in fragment.text
    admin_fragment = await admin.get(f"{path}/sync", headers={"HX-Request": "true"})
    assert "hx-swap-oob" not in admin_fragment.text
    form = await client.get(f"{path}/reconnect")
    assert (form.status_code, form.headers["location"]) == (303, f"{path}#reconnect")
    full = await client.get(path)
    assert "hx-swap-oob" not in full.text


async def test_usage_charts_have_axes_units_and_empty_states(web: WebSandbox) -> None:
    client, _ = await web.signed_in("customer")
    html, text = await customer_page(web, client)
    assert "No usage yet — the first snapshot is taken" in text
    assert "No assistant lookups in the last 48 hours." in text
    assert "<svg" not in html

    now = web.enrolled.clock.now()
    usage = web.web.customers.usage
    for hours, (usd, messages, calls) in enumerate([(10, 100, 50), (12, 130, 70)]):
        await usage.record(
            web.student_id,
            taken_at=now - timedelta(hours=12 - 6 * hours),
            usd_spent=Decimal(usd),
            messages=messages,
            tool_calls=calls,
            upstream_calls=calls,
            kind="baseline" if hours == 0 else "periodic",
        )
    html, text = await customer_page(web, client)
    assert html.count("<svg") == 2  # usage and spend; the hourly chart is still empty
    assert "USD x 100" not in html
    assert "US dollars" in text and "count since onboarding" in text
    assert "latest guest messages: 30; assistant lookups (tool calls): 20." in text
    assert "latest spend (US dollars): $2.00." in text


async def test_the_activity_page_tells_a_customer_its_events_in_words(web: WebSandbox) -> None:
    await web.enrolled.break_kross()
    client, token = await web.signed_in("customer")
    refused = await post_reconnect(web, client, token, "certainly-not-the-password")
    assert refused.status_code == 422
    text = assert_plain(web, refused.text)
    assert "Your booking system refused these credentials." in text
    assert "Nothing was changed" in text
    await run_sync(web, client, token, commit=False)
    page = await client.get("/console/audit")
    assert page.status_code == 200
    text = assert_plain(web, page.text)
    assert "Activity" in text and "What happened on your account" in text
    assert "You signed in to this console." in text
    assert "You started a check of the notes." in text
    assert "You tried new booking-system credentials — it did not work." in text
    assert "New booking-system credentials were tried and refused; nothing changed." in text
    for internal in ("console.action", "customer_user", "customer:", "facility:"):
        assert internal not in text
