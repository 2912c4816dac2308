"""The console in a real browser: Debian's Chromium driven by Playwright for Python.

``live_console`` serves the whole app (gateway, web app, console) with uvicorn on a
loopback port, from a thread with its own event loop, over an enrolled sandbox on
SQLite (:func:`tests.web.support.web_sandbox`). Tests drive Chromium with
Playwright's sync API and reach into the server's loop with :meth:`LiveConsole.run`
(e.g. to change a password in the booking-system emulator).

Chromium comes from Debian (``/usr/bin/chromium``); when it is missing the setup
installs it with apt-get, once per machine (a file lock keeps xdist workers from
racing). Where it cannot be installed the tests are skipped — except under CI=true,
where that is a failure.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
import uvicorn

from pmsgate.customers.service import register_customer
from tests.conftest import IN_CI
from tests.customers.support import profile_of, student_id_of
from tests.e2e.processes import free_port
from tests.web.support import WebSandbox, record_route, web_sandbox

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
T = TypeVar("T")


def _apt_get(*args: str) -> bool:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", *args], env=env, capture_output=True, check=False)
    return done.returncode == 0


def ensure_chromium() -> None:
    """Install Debian's Chromium when it is missing (skip, or fail under CI, when impossible)."""
    if CHROMIUM.exists():
        return
    with open("/tmp/pmsgate-chromium-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if CHROMIUM.exists():
            return
        can_install = shutil.which("apt-get") is not None and os.geteuid() == 0
        if can_install and (
            _apt_get("install", "-y", "chromium")
            or (_apt_get("update") and _apt_get("install", "-y", "chromium"))
        ):
            return
    message = "Debian's chromium is not installed and could not be installed with apt-get"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class LiveConsole:
    """The app served on loopback, with the accounts the tests sign in with."""

    url: str
    admin: tuple[str, str]
    customer: tuple[str, str]
    other_customer: tuple[str, str]
    sandbox: WebSandbox
    loop: asyncio.AbstractEventLoop
    server: uvicorn.Server

    def stop(self) -> None:
        """Ask the server to finish (from the tests' thread)."""
        self.loop.call_soon_threadsafe(setattr, self.server, "should_exit", True)

    def run(self, work: Callable[[WebSandbox], Awaitable[T]]) -> T:
        """Run ``work(sandbox)`` on the server's event loop and return its result."""

        async def call() -> T:
            return await work(self.sandbox)

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout=60)


# The accounts a served console's tests sign in with: admin, customer, other customer.
Accounts = tuple[tuple[str, str], tuple[str, str], tuple[str, str]]


async def _standard_accounts(sandbox: WebSandbox) -> Accounts:
    """An admin, the enrolled customer's owner, and a second customer's owner."""
    second = sandbox.enrolled.sandbox.kross.facility_summaries()[1]
    await register_customer(sandbox.web.customers, profile_of(second))
    admin = await sandbox.add_user("admin", email="admin@example.com")
    customer = await sandbox.add_user("customer", email="owner@example.com")
    other_customer = await sandbox.add_user(
        "customer", email="other@example.com", student_id=student_id_of(second)
    )
    return admin, customer, other_customer


def _serve(
    tmp: Path,
    ready: Future[LiveConsole],
    accounts: Callable[[WebSandbox], Awaitable[Accounts]],
    settings_overrides: Callable[[Path, int], dict[str, Any]] | None,
) -> None:
    async def main() -> None:
        port = free_port()
        overrides = settings_overrides(tmp, port) if settings_overrides else None
        database_url = f"sqlite+aiosqlite:///{tmp / 'console.db'}"
        async with web_sandbox(database_url, settings_overrides=overrides) as sandbox:
            admin, customer, other_customer = await accounts(sandbox)
            server = uvicorn.Server(
                uvicorn.Config(sandbox.app, host="127.0.0.1", port=port, log_config=None)
            )
            serving = asyncio.create_task(server.serve())
            while not server.started:  # noqa: ASYNC110  # uvicorn has no awaitable for it
                await asyncio.sleep(0.02)
            ready.set_result(
                LiveConsole(
                    url=f"http://127.0.0.1:{port}",
                    admin=admin,
                    customer=customer,
                    other_customer=other_customer,
                    sandbox=sandbox,
                    loop=asyncio.get_running_loop(),
                    server=server,
                )
            )
            await serving

    try:
        asyncio.run(main())
    except BaseException as error:  # surface a start-up failure in the test, not a hang
        if not ready.done():
            ready.set_exception(error)
        raise


@contextmanager
def serve_console(
    tmp: Path,
    *,
    accounts: Callable[[WebSandbox], Awaitable[Accounts]] = _standard_accounts,
    settings_overrides: Callable[[Path, int], dict[str, Any]] | None = None,
) -> Iterator[LiveConsole]:
    """The app served on a loopback port from its own thread until the block ends.

    ``settings_overrides(tmp, port)``: settings that depend on where it is served (e.g. the
    public URL of links in messages); ``accounts``: who the tests sign in as.
    """
    ready: Future[LiveConsole] = Future()
    thread = threading.Thread(
        target=_serve, args=(tmp, ready, accounts, settings_overrides), daemon=True
    )
    thread.start()
    live = ready.result(timeout=120)
    try:
        yield live
    finally:
        live.stop()
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def live_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveConsole]:
    """The app served on a loopback port for the module's browser tests."""
    with serve_console(tmp_path_factory.mktemp("console")) as live:
        yield live


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright."""
    ensure_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (its own cookies) and page, in an English browser.

    The pages these tests read are the English ones; the Italian and phone-sized pages
    have their own contexts (``tests/browser/test_people_browser.py``).
    """
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB")
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def notifying_settings(tmp: Path, port: int) -> dict[str, Any]:
    """Settings overrides of a console whose notices link to it and tell the team too."""
    return {
        "data_dir": tmp,
        "public_url": f"http://127.0.0.1:{port}",
        "notify_team_email": "ops@platform.example",
    }


@contextmanager
def serve_notifying_console(
    tmp: Path, accounts: Callable[[WebSandbox], Awaitable[Accounts]]
) -> Iterator[LiveConsole]:
    """:func:`serve_console` whose notices link to it and tell the team too."""
    with serve_console(tmp, accounts=accounts, settings_overrides=notifying_settings) as served:
        yield served


async def english_owner(sandbox: WebSandbox) -> tuple[str, str]:
    """The enrolled customer's owner (the address its notices go to), signed up, reading
    English (the notices' and pages' words the incident tests assert)."""
    profile = profile_of(sandbox.enrolled.facility)
    await sandbox.web.customers.customers.upsert(replace(profile, language="en"))
    return await sandbox.add_user("customer", email=profile.email)


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under test-artifacts/screenshots/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


async def onboarded_on_route_b(sandbox: WebSandbox, student_id: str) -> None:
    """Record a finished onboarding of ``student_id`` on Route B, its message sent."""
    await record_route(sandbox, "B", live=True, student_id=student_id)
