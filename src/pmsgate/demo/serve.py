"""`pmsgate demo --serve`: the emulators, the gateway and the console running, to try by hand.

Two customers are onboarded first (Route A: a partner facility whose workspace has
listings; Route B: an own-key facility without), on a clock that skips ahead instead
of waiting, so the setup takes seconds; then everything runs in real time. The
sandbox is served over HTTP too, so a password can be changed in the booking-system
emulator with curl and the console shows the integration go to ``error``.
"""

from __future__ import annotations

import asyncio
import email.policy
import re
import secrets
import socket
import tempfile
from dataclasses import dataclass
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import uvicorn
from pydantic import SecretStr
from rich.console import Console
from rich.text import Text

from pmsgate.app import create_app
from pmsgate.clock import FastForwardClock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.demo.fleet import FleetMember, Upstream, generate_customers
from pmsgate.demo.onboarding import (
    demo_facilities,
    onboard_demo_customers,
    prepare_route_a,
    sandbox_settings,
)
from pmsgate.demo.story import Story
from pmsgate.errors import PmsgateError
from pmsgate.jobs.connections import CHECK_CONNECTIONS
from pmsgate.jobs.scheduler import build_scheduler
from pmsgate.mail import outbox_dir
from pmsgate.onboarding.runner import OnboardingRunner
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.customers import ClockSleep, customer_document, sandbox_http_factory
from pmsgate.web.context import WebServices

ADMIN_EMAIL = "admin@platform-team.example"
# The team's notice address: with no SMTP server its e-mails land in the outbox, next to the
# customer's, so an incident shows both sides (production: PMSGATE_NOTIFY_TEAM_EMAIL).
TEAM_EMAIL = "team@platform-team.example"
# The demo notices a changed booking-system password this soon (production: 15 minutes).
DEMO_KROSS_CHECK_INTERVAL_S = 15.0


@dataclass(frozen=True)
class DemoLogin:
    """A console login the demo created (printed once; the database keeps only a hash)."""

    email: str
    password: str
    role: str
    student_id: str | None = None
    route: str = ""


def _ensure_free(port: int, option: str) -> None:
    """A clear error, before anything starts, when a port is taken."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise PmsgateError(
                f"Port {port} on 127.0.0.1 is already in use.",
                code="port_in_use",
                status=409,
                hint=f"Stop what listens there, or choose another port with {option}.",
            ) from None


async def _create_logins(web: WebServices, sandbox: Sandbox) -> list[DemoLogin]:
    logins = [DemoLogin(ADMIN_EMAIL, secrets.token_urlsafe(12), "admin")]
    for facility, route in zip(demo_facilities(sandbox), ("A", "B"), strict=True):
        notes = next(
            w for w in sandbox.notion.workspaces() if w["hotel_id"] == facility["hotel_id"]
        )
        document = customer_document(facility, notes)
        logins.append(
            DemoLogin(
                str(document["email"]),
                secrets.token_urlsafe(12),
                "customer",
                str(document["student_id"]),
                route=f"Route {route}",
            )
        )
    for login in logins:
        if login.role == "admin":
            await web.users.add(login.email, SecretStr(login.password), role="admin")
        else:
            # Onboarding created the customer's account and invited it; the demo also gives
            # it a password to print (its invitation link keeps working until it is used).
            await web.users.set_password(login.email, SecretStr(login.password))
    return logins


def invitation_links(data_dir: Path) -> list[tuple[str, str]]:
    """(address, link) of the invitations onboarding recorded in the outbox."""
    links = []
    for path in sorted((data_dir / "outbox").glob("invite.*.eml")):
        message = BytesParser(policy=email.policy.default).parsebytes(path.read_bytes())
        body = message.get_body(preferencelist=("plain",))
        text = str(body.get_content()) if body is not None else ""
        found = re.search(r"https?://\S+/login/link/[A-Za-z0-9_-]+", text)
        if found:
            links.append((str(message["To"]), found.group(0)))
    return links


def serve_settings(data_dir: Path, app_url: str) -> Settings:
    """The served demo's settings: the sandbox's, public at ``app_url``, the team notified.

    Notices (the customer's and the team's) go to ``<data_dir>/outbox`` (no SMTP server).
    """
    return sandbox_settings(
        data_dir,
        gateway_public_url=app_url,
        job_intervals_s={CHECK_CONNECTIONS: DEMO_KROSS_CHECK_INTERVAL_S},
        cookie_secure="never",
        notify_team_email=TEAM_EMAIL,
    )


def _server(app: Any, port: int) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))


async def _started(*servers: uvicorn.Server) -> None:
    # uvicorn offers no awaitable for "listening": poll its flag (only while starting).
    while not all(server.started for server in servers):  # noqa: ASYNC110  # see above
        await asyncio.sleep(0.05)


def _print_welcome(
    console: Console,
    *,
    sandbox: Sandbox,
    sandbox_url: str,
    app_url: str,
    logins: list[DemoLogin],
    gateway_key: str,
    invitations: list[tuple[str, str]],
    outbox: Path,
) -> None:
    partner, own = demo_facilities(sandbox)
    story = Story(console)
    console.print()
    console.rule(Text("pmsgate demo --serve (Ctrl-C to stop)", style="bold"))
    story.own_line("The console:", f"{app_url}/console")
    story.plain("Demo logins (created for this run only):")
    for login in logins:
        customer = f"customer {login.student_id}, {login.route}" if login.student_id else "all"
        story.plain(f"  {login.role} ({customer})")
        console.print(f"    e-mail:   {login.email}", soft_wrap=True, markup=False)
        console.print(f"    password: {login.password}", soft_wrap=True, markup=False)
    story.own_line("The gateway (tools at /v1/tools, MCP at /mcp):", app_url)
    story.own_line(f"A gateway key of facility {partner['hotel_id']}:", gateway_key)
    story.plain("The emulators (Kross, the assistant platform, Notion):")
    for path in ("kross", "assistant", "notion"):
        console.print(f"  {sandbox_url}/{path}", soft_wrap=True, markup=False, highlight=False)
    story.plain(
        "Try: sign in as the Route A customer, run a dry run and a commit (onboarding already "
        "committed its knowledge, so the commit finds every node unchanged); then change its "
        "booking-system password in the emulator:"
    )
    # Never wrapped by the terminal: continued lines a shell takes as one, so it can be copied.
    for line in (
        "  curl -X POST -H 'Content-Type: application/json' \\",
        '    -d \'{"password": "new-secret-1"}\' \\',
        f"    {sandbox_url}/kross/_sandbox/facilities/{partner['hotel_id']}/password",
    ):
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    story.plain(
        f"Within about {2 * DEMO_KROSS_CHECK_INTERVAL_S:.0f} s the console shows `error`; "
        f"reconnect on the customer's page with the API user {partner['username']} and the "
        "new password."
    )
    story.plain(f"Route B customer: {own['name']} ({own['hotel_id']}).")
    story.own_line(
        f"Notices: the customer's and the team's ({TEAM_EMAIL}) e-mails are written to this "
        "directory; the team's are incident-<facility>.<time>.<error|recovered>.team.eml "
        "(incidents: /console/attention):",
        str(outbox),
    )
    for address, link in invitations:
        story.own_line(
            f"Invitation of {address} (onboarding sent it; open it in a private window to "
            "choose a password as the customer would):",
            link,
        )


def in_the_emulator(sandbox: Sandbox) -> Upstream:
    """Register each generated facility in the booking-system emulator (so the scheduled
    access check finds it); one generated in ``error`` gets its password changed there."""

    def register(member: FleetMember, username: str, password: str) -> None:
        assert member.hotel_id is not None
        sandbox.kross.add_facility(member.hotel_id, member.name, username, password)
        if member.status == "error":
            sandbox.kross.change_password(member.hotel_id, password + "-changed")

    return register


async def serve_demo(
    console: Console, *, seed: int, sandbox_port: int, gateway_port: int, customers: int = 0
) -> None:
    """Onboard two customers (and generate ``customers`` more), then serve it all."""
    _ensure_free(sandbox_port, "--sandbox-port")
    _ensure_free(gateway_port, "--gateway-port")
    clock = FastForwardClock()
    sandbox = Sandbox(seed=seed, clock=clock)
    sandbox_app = sandbox.asgi_app()
    sandbox_url = f"http://127.0.0.1:{sandbox_port}"
    app_url = f"http://127.0.0.1:{gateway_port}"
    factory = sandbox_http_factory(sandbox_app)
    with tempfile.TemporaryDirectory(prefix="pmsgate-demo-serve-") as data_dir:
        settings = serve_settings(Path(data_dir), app_url)
        async with open_container(
            settings, http_factory=factory, clock=clock, sleep=ClockSleep(clock)
        ) as container:
            services, web = container.gateway, container.web
            app = create_app(settings, container=container)
            servers = [_server(sandbox_app, sandbox_port), _server(app, gateway_port)]
            serving = [asyncio.create_task(server.serve()) for server in servers]
            await _started(*servers)
            console.rule(Text("Onboarding the demo customers", style="bold"))
            prepare_route_a(sandbox)
            await onboard_demo_customers(
                OnboardingRunner(container.onboarding), sandbox, Story(console)
            )
            logins = await _create_logins(web, sandbox)
            if customers:
                console.print(f"Generating {customers} customers in varied states…")
                await generate_customers(
                    container.customers,
                    clock,
                    count=customers,
                    upstream=in_the_emulator(sandbox),
                )
            partner, _ = demo_facilities(sandbox)
            _, gateway_key = await services.facilities.mint_key(str(partner["hotel_id"]), "demo")
            _print_welcome(
                console,
                sandbox=sandbox,
                sandbox_url=sandbox_url,
                app_url=app_url,
                logins=logins,
                gateway_key=gateway_key,
                invitations=invitation_links(Path(data_dir)),
                outbox=outbox_dir(settings),
            )
            async with build_scheduler(web):
                await asyncio.gather(*serving)
