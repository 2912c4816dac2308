"""`make demo`: the whole system, offline, against in-process emulators.

Everything goes through the real clients and HTTP interfaces; only the network
is replaced (an ``httpx.ASGITransport`` onto the emulators). Each chapter is a
module of this package; each tells its part through a :class:`~pmsgate.demo.story.Story`
(readable at 80 columns) and notes its figures for the closing summary.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import httpx
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.demo.apps import apps_chapter
from pmsgate.demo.assistant import assistant_chapter
from pmsgate.demo.booking_system import booking_system_chapter
from pmsgate.demo.first_contact import first_contact_chapter
from pmsgate.demo.gateway import GatewayTour, gateway_chapter
from pmsgate.demo.onboarding import onboarding_chapter
from pmsgate.demo.story import Story
from pmsgate.demo.web import web_chapter
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY

SANDBOX_HOST = "http://sandbox.local"


async def run_demo(story: Story, *, seed: int = 1) -> None:
    """Run every demo chapter against a fresh sandbox, then sum up what they showed."""
    # A manual clock lets the demo show what happens as time passes, without waiting.
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    box = Sandbox(seed=seed, clock=clock)
    transport = httpx.ASGITransport(app=box.asgi_app())
    async with httpx.AsyncClient(transport=transport, base_url=SANDBOX_HOST) as http:
        settings = Settings(kross_base_url=f"{SANDBOX_HOST}/kross")
        facility = box.kross.facility_summaries()[0]
        await booking_system_chapter(story, settings, http, facility, clock)
        with tempfile.TemporaryDirectory(prefix="pmsgate-demo-") as data_dir:
            gateway_settings = Settings(
                # Embedded defaults whatever the environment says: SQLite, in-memory limiter/cache.
                data_dir=Path(data_dir),
                database_url=None,
                redis_url=None,
                kross_base_url=f"{SANDBOX_HOST}/kross",
                partner_api_key=SecretStr(SANDBOX_PARTNER_API_KEY),
                secret_keys=SecretStr(generate_key_spec("demo")),
                limiter_wait_s=0.0,
            )
            async with GatewayTour.open(story, gateway_settings, http, box, clock) as tour:
                await gateway_chapter(tour)
                await assistant_chapter(
                    story,
                    http,
                    f"{SANDBOX_HOST}/assistant",
                    tour.app,
                    tour.key,
                    today=clock.now().date(),
                )
        with tempfile.TemporaryDirectory(prefix="pmsgate-onboarding-") as data_dir:
            onboarded = await onboarding_chapter(story, Path(data_dir), seed=seed)
            await web_chapter(story, onboarded)
            await apps_chapter(story, onboarded)
        await first_contact_chapter(story, seed=seed, start=clock.now())
    story.summary()
