"""Demo chapter 5: the web app — the admin's overview, a customer's sync and reconnect."""

from __future__ import annotations

import email.policy
import re
import secrets
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from rich.markup import escape

from pmsgate.app import create_app
from pmsgate.audit.actions import Actor
from pmsgate.container import open_container
from pmsgate.customers.registry_check import registry_checks
from pmsgate.demo.onboarding import CONSOLE_URL, Onboarded, customer_file_of, demo_facilities
from pmsgate.demo.story import Story
from pmsgate.jobs import CHECK_CONNECTIONS, REFRESH_USAGE, build_scheduler
from pmsgate.jobs.notify import NOTIFY_INCIDENTS
from pmsgate.sandbox.customers import ClockSleep, sandbox_http_factory
from pmsgate.storage.allowlist import AllowlistComment
from pmsgate.web.context import WebServices

APP_URL = CONSOLE_URL


async def _signed_in(web: WebServices, app: Any, email: str, **account: Any) -> httpx.AsyncClient:
    """A client of the app signed in as a new account (its password never leaves this function)."""
    password = secrets.token_urlsafe(12)
    await web.users.add(email, SecretStr(password), **account)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=APP_URL)
    answer = await client.post("/api/auth/login", json={"email": email, "password": password})
    answer.raise_for_status()
    client.headers["X-CSRF-Token"] = answer.json()["csrfToken"]
    return client


def _counters(body: dict[str, Any], names: tuple[str, ...]) -> str:
    return ", ".join(f"{name} {body[name]}" for name in names if name in body)


def _detail_words(detail: Any) -> str:
    """A job run's detail as words: each entry, a list by its length."""
    if not isinstance(detail, dict):
        return str(detail)
    return ", ".join(
        f"{key.replace('_', ' ')} {len(value) if isinstance(value, list) else value}"
        for key, value in detail.items()
    )


async def web_chapter(story: Story, onboarded: Onboarded) -> None:
    """Sign in as an admin and as the Route A customer; sync, break and reconnect the PMS."""
    story.chapter(5, "The web app, the console and the team's incidents")
    sandbox, settings, clock = onboarded.sandbox, onboarded.settings, onboarded.clock
    # Incident notices (docs/operations.md, Notifications): the team's address, the link's base.
    settings = settings.model_copy(
        update={"notify_team_email": "ops@platform-team.example", "public_url": APP_URL}
    )
    factory = sandbox_http_factory(sandbox.asgi_app())
    async with open_container(
        settings, http_factory=factory, clock=clock, sleep=ClockSleep(clock)
    ) as container:
        web = container.web
        app = create_app(settings, container=container)
        admin = await _signed_in(web, app, "admin@platform-team.example", role="admin")
        partner, _ = demo_facilities(sandbox)
        customer = customer_file_of(sandbox, partner)
        owner = await _accept_invitation(story, app, settings.data_dir, customer.email)
        try:
            await _console_tour(story, onboarded, admin, owner)
            await _incident(story, web, onboarded, owner, settings.data_dir)
            await _allowlist_holds(story, web, owner, customer.student_id, customer.recipient)
            await _registry_caught_and_fixed(story, web, owner, customer.student_id)
            await _jobs_and_charts(story, web, owner, customer.student_id)
        finally:
            await admin.aclose()
            await owner.aclose()


async def _console_tour(
    story: Story, onboarded: Onboarded, admin: httpx.AsyncClient, owner: httpx.AsyncClient
) -> None:
    """The admin's overview; the customer kept to its own data; a knowledge sync."""
    partner, own = demo_facilities(onboarded.sandbox)
    customer = customer_file_of(onboarded.sandbox, partner)
    other = customer_file_of(onboarded.sandbox, own)
    home = await admin.get("/console")
    statuses = re.findall(r'data-testid="pms-status">([^<]+)<', home.text)
    story.say(
        f"Admin console /console: HTTP {home.status_code}, {len(statuses)} customers, "
        f"booking system: {', '.join(statuses)}."
    )
    refused = await owner.get(f"/api/{other.student_id}/status")
    story.say(
        f"The Route A customer asking for another customer's status: HTTP "
        f"{refused.status_code} {refused.json()['error']['code']}."
    )
    api = f"/api/{customer.student_id}"
    dry = (await owner.post(f"{api}/sync-knowledge", json={"commit": False})).json()
    story.say(
        "Dry run from the customer's session: "
        + _counters(dry, ("apartments", "unresolvedApartments", "incompleteTemplates"))
    )
    commit = (await owner.post(f"{api}/sync-knowledge", json={"commit": True})).json()
    counted = _counters(
        commit, ("created", "failed", "blockedByTemplate", "directoriesCreated", "unchanged")
    )
    story.say(f"Commit: {counted}")
    story.measured(
        "Console",
        f"a knowledge sync from the customer's session (dry run, then commit: {counted})",
    )


async def _incident(
    story: Story,
    web: WebServices,
    onboarded: Onboarded,
    owner: httpx.AsyncClient,
    data_dir: Path,
) -> None:
    """A changed password: the access check, the incident, its notices, the reconnect."""
    sandbox = onboarded.sandbox
    partner, _ = demo_facilities(sandbox)
    customer = customer_file_of(sandbox, partner)
    api = f"/api/{customer.student_id}"
    scheduler = build_scheduler(web)
    new_password = "demo-" + secrets.token_hex(6)
    sandbox.kross.change_password(str(partner["hotel_id"]), new_password)
    await scheduler.run_once(CHECK_CONNECTIONS)
    status = (await owner.get(f"{api}/status")).json()
    story.say(
        "The API password changed in the booking system; the scheduled access check "
        f"ran: integration [bold]{status['pms']['status']}[/] "
        f"({escape(str(status['pms']['lastError']))}); platform listings: "
        f"{len(sandbox.assistant.listings(customer_workspace(sandbox, partner)))}."
    )
    told = await _notices(story, scheduler, data_dir, "told")
    await _team_acts(story, web, customer.student_id, str(partner["hotel_id"]))
    body = {"username": partner["username"], "password": "not-the-new-one"}
    wrong = await owner.put(f"{api}/kross/connect", json=body)
    story.say(
        f"Reconnect with a wrong password: HTTP {wrong.status_code} "
        f"{wrong.json()['error']['code']}; nothing changed."
    )
    body["password"] = new_password
    right = (await owner.put(f"{api}/kross/connect", json=body)).json()
    story.say(
        f"Reconnect with the new password: integration [bold]{right['status']}[/], "
        f"listings sync {right['listingsSync']}, {right['listings']} listings."
    )
    recovered = await _notices(story, scheduler, data_dir, "recovered")
    state = await _incident_closed(story, web, customer.student_id, str(partner["hotel_id"]))
    story.measured(
        "Console",
        f"a changed password: an incident, {told} notices, acknowledged, reconnected by the "
        f"customer ({right['status']}), {recovered} recovery notices, incident {state}",
    )


async def _jobs_and_charts(
    story: Story, web: WebServices, owner: httpx.AsyncClient, student_id: str
) -> None:
    """A scheduled job run once, and the customer's page with its charts."""
    run = await build_scheduler(web).run_once(REFRESH_USAGE)
    story.say(
        f"Scheduled job {run.job}, run once here (on its interval in `pmsgate serve`): "
        f"{run.status}; {escape(_detail_words(run.detail))}."
    )
    page = await owner.get(f"/console/customers/{student_id}")
    charts = page.text.count("<svg")
    story.say(
        f"The customer's page: HTTP {page.status_code}, {charts} charts "
        f"(usage snapshots, tool calls vs upstream requests per hour), served without "
        f"any external script. `pmsgate demo --serve` keeps all this running."
    )
    story.measured("Console", f"{run.job} {run.status}; the customer's page with {charts} charts")


async def _accept_invitation(
    story: Story, app: Any, data_dir: Path, address: str
) -> httpx.AsyncClient:
    """The invitation onboarding sent: its link followed, a password chosen, signed in.

    As the customer would: the e-mail from the outbox, the link's page (which only shows
    the form), the password typed twice, then their own page in their language.
    """
    invitations = sorted((data_dir / "outbox").glob("invite.*.eml"))
    rows, links = [], []
    token = ""
    for path in invitations:
        with path.open("rb") as handle:
            message = BytesParser(policy=email.policy.default).parse(handle)
        text = str(message.get_body(preferencelist=("plain",)).get_content())  # type: ignore[union-attr]
        found = re.search(r"\S+/login/link/([A-Za-z0-9_-]+)", text)
        if str(message["To"]) == address and found:
            token = found.group(1)
        rows.append([str(message["To"]), str(message["Content-Language"]), str(message["Subject"])])
        if found:
            links.append((str(message["To"]), found.group(0)))
    story.table(
        "Onboarding's invitations in the outbox (one per customer, once)",
        ["to", "language", "subject"],
        rows,
        wrap="subject",
    )
    for to, link in links:
        story.own_line(f"The one-time link sent to {to}:", link)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=APP_URL)
    page = await client.get(f"/login/link/{token}")
    password = secrets.token_urlsafe(12)
    form = {"password": password, "password_confirm": password}
    chosen = await client.post(f"/login/link/{token}", data=form, follow_redirects=True)
    title = re.search(r"<title>([^<]*)</title>", chosen.text)
    lang = re.search(r'<html lang="([a-z]+)"', chosen.text)
    headlines = re.findall(r'<p class="headline">(?:<span[^>]*></span>)?([^<]+)<', chosen.text)
    story.say(
        f"The Route A customer opens the invitation's link (HTTP {page.status_code}: a form, "
        f"the link not spent yet), chooses a password and lands on its own page: HTTP "
        f'{chosen.status_code}, <html lang="{lang.group(1) if lang else "?"}">, '
        f"'{escape(title.group(1) if title else '?')}'."
    )
    for headline in headlines[:3]:
        story.say(f"  · {escape(headline.strip())}")
    me = await client.get("/api/auth/me")
    client.headers["X-CSRF-Token"] = me.json()["csrfToken"]
    return client


async def _allowlist_holds(
    story: Story, web: WebServices, owner: httpx.AsyncClient, student_id: str, email: str
) -> None:
    """Step 2's allowlist read on every sync start: off the list, refused; back on, allowed."""
    entry = await web.customers.allowlist.get(email)
    await web.customers.allowlist.remove(email)
    refused = await owner.post(f"/api/{student_id}/sync-knowledge", json={"commit": False})
    await web.customers.allowlist.put(
        email,
        AllowlistComment(
            added_on=entry.added_on,
            contract=entry.contract,
            workspace=entry.workspace,
            apartments=entry.apartments,
            subscription=entry.subscription,
        ),
    )
    allowed = await owner.post(f"/api/{student_id}/sync-knowledge", json={"commit": False})
    story.say(
        f"Knowledge allowlist: the customer's entry removed -> sync HTTP {refused.status_code} "
        f"{refused.json()['error']['code']}; put back -> HTTP {allowed.status_code} at once."
    )
    story.measured(
        "Console",
        f"off the allowlist a sync is refused ({refused.status_code}), back on it is allowed",
    )


async def _registry_caught_and_fixed(
    story: Story, web: WebServices, owner: httpx.AsyncClient, student_id: str
) -> None:
    """A swapped mapping (guests would hear "listing unavailable") caught, then fixed."""
    first, second = (await web.customers.context(student_id)).apartments[:2]
    apartments = web.customers.apartments
    await apartments.update_listing(student_id, first.pms_room_type_id, None)
    await apartments.update_listing(student_id, second.pms_room_type_id, first.assistant_listing_id)
    page = f"/console/customers/{student_id}/registry"
    checked = await owner.post(f"{page}/check", headers={"HX-Request": "true"})
    report = await registry_checks(web.customers).latest(student_id)
    kinds = ", ".join(p.kind.value for p in report.problems) if report else "-"
    problems = len(report.problems) if report else 0
    story.say(
        "Registry: two apartments' listings swapped by hand (guests would hear 'listing "
        f"unavailable'); 'Check again now' in the customer's console (HTTP "
        f"{checked.status_code}) finds {problems} problems: {kinds}."
    )
    fixed = await owner.post(f"{page}/fix", headers={"HX-Request": "true"})
    after = await registry_checks(web.customers).latest(student_id)
    story.say(
        f"'Fix the registry' (HTTP {fixed.status_code}): registry now "
        f"[bold]{after.status if after else '?'}[/], each apartment on its own listing "
        "(a registry.fixed audit event names who)."
    )
    story.measured(
        "Console",
        f"a swapped registry: {problems} problems found, then fixed "
        f"({after.status if after else '?'})",
    )


async def _team_acts(story: Story, web: Any, student_id: str, hotel_id: str) -> None:
    """The team's side: the incident on "Needs attention", acknowledged, checked once more."""
    incident = (await web.incidents.of_customer(student_id, [hotel_id]))[0]
    told = ", ".join(sorted({n.channel for n in incident.sent_notices})) or "nobody yet"
    story.say(
        f"Needs attention (/console/attention): incident #{incident.record.id} "
        f"[bold]{incident.label}[/], {incident.state}, {incident.age_words}, "
        f"{incident.record.failures} failed attempt(s), told: {told}."
    )
    admin = Actor.admin("admin@platform-team.example")
    await web.incidents.acknowledge(incident.record.id, actor=admin)
    await web.incidents.check_now(incident.record.id, actor=admin)
    after = await web.incidents.get(incident.record.id)
    check = next(line for line in reversed(after.timeline()) if line.kind == "check")
    story.say(
        "The team acknowledges it and presses 'Check now' (one token request through the "
        f"facility's limiter): {escape(check.text.removeprefix('Check now: '))}. "
        f"State: {after.state_words}; {len(after.timeline())} lines in its timeline. "
        "The customer's sign-in link is the way back."
    )


async def _incident_closed(story: Story, web: Any, student_id: str, hotel_id: str) -> str:
    """The incident once the customer reconnected: its state (returned) and last lines."""
    incident = (await web.incidents.of_customer(student_id, [hotel_id]))[0]
    story.say(
        f"Incident #{incident.record.id}: [bold]{incident.state}[/] ({incident.age_words}); "
        f"its timeline: " + "; ".join(escape(line.text) for line in incident.timeline()[-3:])
    )
    return str(incident.state)


async def _notices(story: Story, scheduler: Any, data_dir: Path, moment: str) -> int:
    """Run notify-incidents twice and show the messages it wrote (once, whatever the runs)."""
    before = set((data_dir / "outbox").glob("incident-*.eml"))
    for _ in range(2):
        await scheduler.run_once(NOTIFY_INCIDENTS)
    rows = []
    for path in sorted(set((data_dir / "outbox").glob("incident-*.eml")) - before):
        with path.open("rb") as handle:
            message = BytesParser(policy=email.policy.default).parse(handle)
        text = str(message.get_body(preferencelist=("plain",)).get_content())  # type: ignore[union-attr]
        link = re.search(r"/login/link/[A-Za-z0-9_-]+", text)
        rows.append([str(message["To"]), str(message["Subject"]), "yes" if link else "no"])
    story.table(
        f"notify-incidents, run twice: the {moment} notices in the outbox",
        ["to", "subject", "sign-in link"],
        rows,
        wrap="subject",
    )
    return len(rows)


def customer_workspace(sandbox: Any, facility: dict[str, Any]) -> str:
    """The platform workspace the sandbox created for a facility's customer."""
    slug = f"sandbox-{facility['hotel_id']}"
    return next(w.id for w in sandbox.assistant.workspaces() if w.slug == slug)
