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
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pmsgate.app import create_app
from pmsgate.audit.actions import Actor
from pmsgate.container import open_container
from pmsgate.customers.registry_check import registry_checks
from pmsgate.demo.onboarding import CONSOLE_URL, Onboarded, customer_file_of, demo_facilities
from pmsgate.jobs.notify import NOTIFY_INCIDENTS
from pmsgate.jobs.scheduler import CHECK_CONNECTIONS, REFRESH_USAGE, build_scheduler
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


async def web_chapter(console: Console, onboarded: Onboarded) -> None:
    """Sign in as an admin and as the Route A customer; sync, break and reconnect the PMS."""
    console.rule("[bold]5. The web app, the console and the team's incidents")
    sandbox, settings, clock = onboarded.sandbox, onboarded.settings, onboarded.clock
    # Incident notices (docs/operations.md, Notifications): the team's address, the link's base.
    settings = settings.model_copy(
        update={"notify_team_email": "ops@platform-team.example", "public_url": APP_URL}
    )
    partner, own = demo_facilities(sandbox)
    customer = customer_file_of(sandbox, partner)
    other = customer_file_of(sandbox, own)
    factory = sandbox_http_factory(sandbox.asgi_app())
    async with open_container(
        settings, http_factory=factory, clock=clock, sleep=ClockSleep(clock)
    ) as container:
        web = container.web
        app = create_app(settings, container=container)
        scheduler = build_scheduler(web)
        admin = await _signed_in(web, app, "admin@platform-team.example", role="admin")
        owner = await _accept_invitation(console, app, settings.data_dir, customer.email)
        try:
            home = await admin.get("/console")
            statuses = re.findall(r'data-testid="pms-status">([^<]+)<', home.text)
            console.print(
                f"Admin console /console: HTTP {home.status_code}, {len(statuses)} customers, "
                f"booking system: {', '.join(statuses)}."
            )
            refused = await owner.get(f"/api/{other.student_id}/status")
            console.print(
                f"The Route A customer asking for another customer's status: HTTP "
                f"{refused.status_code} {refused.json()['error']['code']}."
            )
            api = f"/api/{customer.student_id}"
            dry = (await owner.post(f"{api}/sync-knowledge", json={"commit": False})).json()
            console.print(
                "Dry run from the customer's session: "
                + _counters(dry, ("apartments", "unresolvedApartments", "incompleteTemplates"))
            )
            commit = (await owner.post(f"{api}/sync-knowledge", json={"commit": True})).json()
            console.print(
                "Commit: "
                + _counters(
                    commit,
                    ("created", "failed", "blockedByTemplate", "directoriesCreated", "unchanged"),
                )
            )

            new_password = "demo-" + secrets.token_hex(6)
            sandbox.kross.change_password(str(partner["hotel_id"]), new_password)
            await scheduler.run_once(CHECK_CONNECTIONS)
            status = (await owner.get(f"{api}/status")).json()
            console.print(
                "The API password changed in the booking system; the scheduled access check "
                f"ran: integration [bold]{status['pms']['status']}[/] "
                f"({status['pms']['lastError']}); platform listings: "
                f"{len(sandbox.platform.listings(customer_workspace(sandbox, partner)))}."
            )
            await _notices(console, scheduler, settings.data_dir, "told")
            await _team_acts(console, web, customer.student_id, str(partner["hotel_id"]))
            body = {"username": partner["username"], "password": "not-the-new-one"}
            wrong = await owner.put(f"{api}/kross/connect", json=body)
            console.print(
                f"Reconnect with a wrong password: HTTP {wrong.status_code} "
                f"{wrong.json()['error']['code']}; nothing changed."
            )
            body["password"] = new_password
            right = (await owner.put(f"{api}/kross/connect", json=body)).json()
            console.print(
                f"Reconnect with the new password: integration [bold]{right['status']}[/], "
                f"listings sync {right['listingsSync']}, {right['listings']} listings."
            )
            await _notices(console, scheduler, settings.data_dir, "recovered")
            await _incident_closed(console, web, customer.student_id, str(partner["hotel_id"]))
            await _allowlist_holds(console, web, owner, customer.student_id, customer.recipient)
            await _registry_caught_and_fixed(console, web, owner, customer.student_id)
            run = await scheduler.run_once(REFRESH_USAGE)
            page = await owner.get(f"/console/customers/{customer.student_id}")
            table = Table(title="Scheduled jobs (run once here; every interval in `pmsgate serve`)")
            for column in ("job", "status", "detail"):
                table.add_column(column)
            table.add_row(run.job, run.status, str(run.detail)[:100])
            console.print(table)
            console.print(
                f"The customer's page: HTTP {page.status_code}, {page.text.count('<svg')} charts "
                f"(usage snapshots, tool calls vs upstream requests per hour), served without "
                f"any external script. `pmsgate demo --serve` keeps all this running."
            )

        finally:
            await admin.aclose()
            await owner.aclose()


async def _accept_invitation(
    console: Console, app: Any, data_dir: Path, address: str
) -> httpx.AsyncClient:
    """The invitation onboarding sent: its link followed, a password chosen, signed in.

    As the customer would: the e-mail from the outbox, the link's page (which only shows
    the form), the password typed twice, then their own page in their language.
    """
    invitations = sorted((data_dir / "outbox").glob("invite.*.eml"))
    table = Table(title="Onboarding's invitations in the outbox (one per customer, once)")
    for column in ("to", "language", "subject", "one-time link"):
        table.add_column(column)
    token = ""
    for path in invitations:
        with path.open("rb") as handle:
            message = BytesParser(policy=email.policy.default).parse(handle)
        text = str(message.get_body(preferencelist=("plain",)).get_content())  # type: ignore[union-attr]
        found = re.search(r"/login/link/([A-Za-z0-9_-]+)", text)
        if str(message["To"]) == address and found:
            token = found.group(1)
        link = f"/login/link/{found.group(1)[:6]}…" if found else "-"
        table.add_row(
            str(message["To"]),
            str(message["Content-Language"]),
            escape(str(message["Subject"])),
            link,
        )
    console.print(table)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=APP_URL)
    page = await client.get(f"/login/link/{token}")
    password = secrets.token_urlsafe(12)
    form = {"password": password, "password_confirm": password}
    chosen = await client.post(f"/login/link/{token}", data=form, follow_redirects=True)
    title = re.search(r"<title>([^<]*)</title>", chosen.text)
    lang = re.search(r'<html lang="([a-z]+)"', chosen.text)
    headlines = re.findall(r'<p class="headline">(?:<span[^>]*></span>)?([^<]+)<', chosen.text)
    console.print(
        f"The Route A customer opens the invitation's link (HTTP {page.status_code}: a form, "
        f"the link not spent yet), chooses a password and lands on its own page: HTTP "
        f'{chosen.status_code}, <html lang="{lang.group(1) if lang else "?"}">, '
        f"'{escape(title.group(1) if title else '?')}'."
    )
    for headline in headlines[:3]:
        console.print(f"  · {escape(headline.strip())}")
    me = await client.get("/api/auth/me")
    client.headers["X-CSRF-Token"] = me.json()["csrfToken"]
    return client


async def _allowlist_holds(
    console: Console, web: WebServices, owner: httpx.AsyncClient, student_id: str, email: str
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
    console.print(
        f"Knowledge allowlist: the customer's entry removed -> sync HTTP {refused.status_code} "
        f"{refused.json()['error']['code']}; put back -> HTTP {allowed.status_code} at once."
    )


async def _registry_caught_and_fixed(
    console: Console, web: WebServices, owner: httpx.AsyncClient, student_id: str
) -> None:
    """Spec §7 "Listing unavailable": a swapped mapping caught, then fixed in the console."""
    first, second = (await web.customers.context(student_id)).apartments[:2]
    apartments = web.customers.apartments
    await apartments.update_listing(student_id, first.pms_room_type_id, None)
    await apartments.update_listing(student_id, second.pms_room_type_id, first.assistant_listing_id)
    page = f"/console/customers/{student_id}/registry"
    checked = await owner.post(f"{page}/check", headers={"HX-Request": "true"})
    report = await registry_checks(web.customers).latest(student_id)
    kinds = ", ".join(p.kind.value for p in report.problems) if report else "-"
    console.print(
        f"Registry (spec §7 'Listing unavailable'): two apartments' listings swapped by hand; "
        f"'Check again now' in the customer's console (HTTP {checked.status_code}) finds "
        f"{len(report.problems) if report else 0} problems: {kinds}."
    )
    fixed = await owner.post(f"{page}/fix", headers={"HX-Request": "true"})
    after = await registry_checks(web.customers).latest(student_id)
    console.print(
        f"'Fix the registry' (HTTP {fixed.status_code}): registry now "
        f"[bold]{after.status if after else '?'}[/], each apartment on its own listing "
        "(a registry.fixed audit event names who)."
    )


async def _team_acts(console: Console, web: Any, student_id: str, hotel_id: str) -> None:
    """The team's side: the incident on "Needs attention", acknowledged, checked once more."""
    incident = (await web.incidents.of_customer(student_id, [hotel_id]))[0]
    told = ", ".join(sorted({n.channel for n in incident.sent_notices})) or "nobody yet"
    console.print(
        f"Needs attention (/console/attention): incident #{incident.record.id} "
        f"[bold]{incident.label}[/], {incident.state}, {incident.age_words}, "
        f"{incident.record.failures} failed attempt(s), told: {told}."
    )
    admin = Actor.admin("admin@platform-team.example")
    await web.incidents.acknowledge(incident.record.id, actor=admin)
    await web.incidents.check_now(incident.record.id, actor=admin)
    after = await web.incidents.get(incident.record.id)
    check = next(line for line in reversed(after.timeline()) if line.kind == "check")
    console.print(
        "The team acknowledges it and presses 'Check now' (one token request through the "
        f"facility's limiter): {escape(check.text.removeprefix('Check now: '))}. "
        f"State: {after.state_words}; {len(after.timeline())} lines in its timeline. "
        "The customer's sign-in link is the way back."
    )


async def _incident_closed(console: Console, web: Any, student_id: str, hotel_id: str) -> None:
    incident = (await web.incidents.of_customer(student_id, [hotel_id]))[0]
    console.print(
        f"Incident #{incident.record.id}: [bold]{incident.state}[/] ({incident.age_words}); "
        f"its timeline: " + "; ".join(escape(line.text) for line in incident.timeline()[-3:])
    )


async def _notices(console: Console, scheduler: Any, data_dir: Path, moment: str) -> None:
    """Run notify-incidents twice and show the messages it wrote (once, whatever the runs)."""
    before = set((data_dir / "outbox").glob("incident-*.eml"))
    for _ in range(2):
        await scheduler.run_once(NOTIFY_INCIDENTS)
    table = Table(title=f"notify-incidents, run twice: the {moment} notices in the outbox")
    for column in ("to", "subject", "one-time sign-in link"):
        table.add_column(column)
    for path in sorted(set((data_dir / "outbox").glob("incident-*.eml")) - before):
        with path.open("rb") as handle:
            message = BytesParser(policy=email.policy.default).parse(handle)
        text = str(message.get_body(preferencelist=("plain",)).get_content())  # type: ignore[union-attr]
        link = re.search(r"/login/link/[A-Za-z0-9_-]{6}", text)
        table.add_row(
            str(message["To"]),
            escape(str(message["Subject"])),  # "[pmsgate] …" is not rich markup
            f"{link.group(0)}…" if link else "-",
        )
    console.print(table)


def customer_workspace(sandbox: Any, facility: dict[str, Any]) -> str:
    """The platform workspace the sandbox created for a facility's customer."""
    slug = f"sandbox-{facility['hotel_id']}"
    return next(w.id for w in sandbox.platform.workspaces() if w.slug == slug)
