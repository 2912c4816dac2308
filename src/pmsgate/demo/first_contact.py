"""Demo chapter 7: `pmsgate doctor --live`, the first-contact probe, on the sandbox.

The same probe a platform team runs against the real systems on day one, here
against the emulators twice: as they answer by default, then switched to the
variants public integrations have seen (a bare portal link, ``offset`` ignored, no
``total_count``, the per-apartment reads under ``reservations/``, a platform that
does not offer our assumed endpoints). The second report says what differs and what,
if anything, to set.
"""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path

import httpx
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.demo.story import Story
from pmsgate.doctor.command import render
from pmsgate.doctor.findings import Report
from pmsgate.doctor.runner import Target, run_doctor
from pmsgate.gateway.facilities import NewFacility
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY

HOST = "http://first-contact.local"
PROBED_AREAS = ("booking system", "assistant platform")


async def first_contact_chapter(story: Story, *, seed: int, start: datetime) -> None:
    """Run the doctor's live probe on a default sandbox, then on one in the public variants."""
    story.chapter(7, "First contact: `pmsgate doctor --live` before the first customer")
    clock = ManualClock(start)
    box = Sandbox(seed=seed, clock=clock)
    app = box.asgi_app()

    def http_factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app))

    with tempfile.TemporaryDirectory(prefix="pmsgate-doctor-") as data_dir:
        settings = Settings(
            data_dir=Path(data_dir),
            database_url=None,
            redis_url=None,
            kross_base_url=f"{HOST}/kross",
            assistant_api_url=f"{HOST}/assistant",
            assistant_api_token=SecretStr(SANDBOX_ASSISTANT_TOKEN),
            notion_api_url=f"{HOST}/notion",
            partner_api_key=SecretStr(SANDBOX_PARTNER_API_KEY),
            secret_keys=SecretStr(generate_key_spec("doctor")),
            limiter_wait_s=0.0,
        )
        record = next(f for f in box.kross.facility_summaries() if f["kind"] == "partner")
        async with open_container(settings, http_factory=http_factory, clock=clock) as container:
            await container.gateway.facilities.add(
                NewFacility(
                    hotel_id=record["hotel_id"],
                    username=record["username"],
                    password=SecretStr(record["password"]),
                    kind="partner",
                    integration_id="int-first-contact",
                    name=record["name"],
                )
            )
        target = Target(hotel_id=record["hotel_id"], workspace_id=box.assistant.workspaces()[0].id)

        async def probe(title: str, named: str) -> Report:
            before = box.kross.stats.requests_total
            report = await run_doctor(
                settings, live=True, target=target, http_factory=http_factory, clock=clock
            )
            spent = box.kross.stats.requests_total - before
            story.say(f"\n[bold]{title}[/] ({spent} booking-system requests)")
            shown = _only(report, PROBED_AREAS)
            render(shown, story.console)
            counts = ", ".join(f"{n} {status}" for status, n in shown.counts().items() if n)
            story.measured("First contact", f"{named}: {counts} ({spent} requests)")
            clock.advance(61)  # the next probe starts in a fresh minute window
            return report

        await probe("The emulators as the public references describe them", "as documented")
        box.kross.configure(
            guest_portal_shape="link",
            ignore_offset=True,
            omit_total_count=True,
            grouped_paths=True,
        )
        box.assistant.configure(undocumented_endpoints="absent")
        await probe(
            "The same probe, the emulators switched to the variants seen in public",
            "the public variants",
        )
    story.say(
        "Every warning is a difference pmsgate copes with; the advice says what to set, "
        "and which onboarding steps become a person's task (docs/doctor.md)."
    )


def _only(report: Report, areas: tuple[str, ...]) -> Report:
    return Report([f for f in report.findings if f.area in areas])
