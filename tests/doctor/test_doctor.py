"""`pmsgate doctor` against the sandbox: what it finds in each variant the emulators can show."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.demo.onboarding import sandbox_settings
from pmsgate.doctor.findings import Report, Status
from pmsgate.doctor.kross import PROBE_REQUESTS, offset_verdict, page_cap
from pmsgate.doctor.notion import probe_notion
from pmsgate.doctor.runner import Target, run_doctor
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.storage.db import current_revision, open_database
from tests.gateway.facility_support import new_facility_from_seed

pytestmark = pytest.mark.anyio


@pytest.fixture
def sandbox(clock: ManualClock) -> Sandbox:
    return Sandbox(seed=3, clock=clock)


@pytest.fixture
def http_factory(sandbox: Sandbox) -> Callable[[], httpx.AsyncClient]:
    app = sandbox.asgi_app()
    return lambda: httpx.AsyncClient(transport=httpx.ASGITransport(app=app))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return sandbox_settings(
        tmp_path,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'doctor.db'}",
        secret_keys=SecretStr(generate_key_spec("doc")),
        limiter_wait_s=0.0,
        public_url="https://console.example.test",
    )


@pytest.fixture
async def facility(
    settings: Settings,
    sandbox: Sandbox,
    http_factory: Callable[[], httpx.AsyncClient],
    clock: ManualClock,
) -> AsyncIterator[dict[str, Any]]:
    """A partner facility of the sandbox, registered (migrates the database too)."""
    record = next(f for f in sandbox.kross.facility_summaries() if f["kind"] == "partner")
    async with open_container(
        settings, http_factory=http_factory, clock=clock, migrate=True
    ) as container:
        await container.gateway.facilities.add(
            new_facility_from_seed(record, integration_id="int-doctor")
        )
    yield record


@dataclass
class Probe:
    """The doctor on the sandbox, with one registered partner facility."""

    settings: Settings
    sandbox: Sandbox
    http_factory: Callable[[], httpx.AsyncClient]
    clock: ManualClock
    facility: dict[str, Any]

    @property
    def hotel_id(self) -> str:
        return str(self.facility["hotel_id"])

    @property
    def workspace_id(self) -> str:
        return self.sandbox.assistant.workspaces()[0].id

    async def run(self, *, live: bool = True, **target: Any) -> Report:
        return await run_doctor(
            self.settings,
            live=live,
            target=Target(**target),
            http_factory=self.http_factory,
            clock=self.clock,
        )


@pytest.fixture
def probe(
    settings: Settings,
    sandbox: Sandbox,
    http_factory: Callable[[], httpx.AsyncClient],
    clock: ManualClock,
    facility: dict[str, Any],
) -> Probe:
    return Probe(settings, sandbox, http_factory, clock, facility)


def status_of(report: Report, area: str, check: str) -> Status:
    finding = report.of(area, check)
    assert finding is not None, f"{area}/{check} did not run"
    return finding.status


async def test_offline_doctor_finds_a_ready_deployment_on_the_sandbox(
    probe: Probe,
) -> None:
    report = await probe.run(live=False)

    assert not report.failed, [f for f in report.findings if f.status is Status.FAIL]
    assert status_of(report, "local", "database") is Status.OK
    assert status_of(report, "local", "redis") is Status.WARN  # one process only
    assert status_of(report, "local", "console address") is Status.OK
    assert status_of(report, "booking system", "reachable") is Status.OK
    assert status_of(report, "assistant platform", "account") is Status.OK
    assert status_of(report, "assistant platform", "runtimes") is Status.OK
    assert report.of("booking system", "login") is None  # nothing live without --live


async def test_an_unmigrated_database_fails_and_the_live_probe_is_skipped(
    settings: Settings, http_factory: Callable[[], httpx.AsyncClient], clock: ManualClock
) -> None:
    report = await run_doctor(
        settings, live=True, target=Target(hotel_id="1"), http_factory=http_factory, clock=clock
    )

    assert status_of(report, "local", "database") is Status.FAIL
    assert status_of(report, "live probe", "prerequisites") is Status.SKIP
    assert report.failed


async def test_an_unmigrated_database_is_named_with_the_revision_needed_and_left_unmigrated(
    settings: Settings, http_factory: Callable[[], httpx.AsyncClient], clock: ManualClock
) -> None:
    report = await run_doctor(settings, http_factory=http_factory, clock=clock)

    finding = report.of("local", "database")
    assert finding is not None and finding.status is Status.FAIL
    assert finding.details["code"] == "schema_outdated"
    assert report.of("local", "vault keys") is None  # nothing to read yet
    async with open_database(settings.effective_database_url, migrate=False) as engine:
        assert await current_revision(engine) is None  # the doctor never migrates


async def doctor_with_keys(probe: Probe, secret_keys: str) -> Report:
    """The doctor's report on the probe's data as a replica with other vault keys sees it."""
    settings = probe.settings.model_copy(update={"secret_keys": SecretStr(secret_keys)})
    return await run_doctor(settings, http_factory=probe.http_factory, clock=probe.clock)


async def test_the_vault_keys_that_read_the_stored_secrets_are_reported(probe: Probe) -> None:
    report = await probe.run(live=False)

    finding = report.of("local", "vault keys")
    assert finding is not None and finding.status is Status.OK
    assert "doc" in finding.found  # the key id its sample decrypted with


async def test_a_replica_without_the_key_of_the_stored_secrets_is_told_which_key_id_is_missing(
    probe: Probe,
) -> None:
    report = await doctor_with_keys(probe, generate_key_spec("new"))

    finding = report.of("local", "vault keys")
    assert finding is not None and finding.status is Status.FAIL
    assert finding.details["missing"] == ["doc"]
    assert "'doc'" in finding.found
    assert report.failed


async def test_a_different_key_under_the_stored_key_id_is_reported_as_not_decrypting(
    probe: Probe,
) -> None:
    report = await doctor_with_keys(probe, generate_key_spec("doc"))  # same id, another key

    finding = report.of("local", "vault keys")
    assert finding is not None and finding.status is Status.FAIL
    assert finding.details == {"missing": [], "wrong": ["doc"]}


async def test_the_live_probe_reports_the_documented_shapes_within_its_request_budget(
    probe: Probe,
) -> None:
    probe.sandbox.kross.configure(ignore_date_filters=False)
    before = probe.sandbox.kross.stats.requests_by_hotel[probe.hotel_id]

    report = await probe.run(hotel_id=probe.hotel_id)

    spent = probe.sandbox.kross.stats.requests_by_hotel[probe.hotel_id] - before
    assert 0 < spent <= PROBE_REQUESTS
    for check in ("login", "list envelope", "page size", "guest_portal", "offset", "date filters"):
        assert status_of(report, "booking system", check) is Status.OK, check
    assert report.of("booking system", "page size").details["cap"] is None  # type: ignore[union-attr]
    assert status_of(report, "booking system", "path form") is Status.OK
    assert not report.failed


@pytest.mark.parametrize(
    ("variant", "check", "detail"),
    [
        ({"guest_portal_shape": "link"}, "guest_portal", {}),
        ({"guest_portal_shape": "absent"}, "guest_portal", {}),
        ({"ignore_offset": True}, "offset", {}),
        ({"omit_total_count": True}, "list envelope", {}),
        ({"ignore_date_filters": True}, "date filters", {}),
        ({"max_page_size": 3}, "page size", {"cap": 3}),
        (
            {"grouped_paths": True},
            "path form",
            {"path": "reservations/get-check-in-instructions"},
        ),
    ],
)
async def test_each_booking_system_variant_is_reported_with_what_to_do(
    probe: Probe,
    variant: dict[str, Any],
    check: str,
    detail: dict[str, Any],
) -> None:
    probe.sandbox.kross.configure(**variant)

    report = await probe.run(hotel_id=probe.hotel_id)

    finding = report.of("booking system", check)
    assert finding is not None and finding.status is Status.WARN
    assert finding.advice
    for key, value in detail.items():
        assert finding.details[key] == value
    assert not report.failed


@pytest.mark.parametrize(("cap", "status"), [(3, Status.WARN), (50, Status.WARN), (100, Status.OK)])
async def test_the_page_cap_is_reported_whatever_its_size(
    probe: Probe, cap: int, status: Status
) -> None:
    probe.sandbox.kross.add_history(probe.hotel_id, 300)
    probe.sandbox.kross.configure(max_page_size=cap)

    report = await probe.run(hotel_id=probe.hotel_id)

    finding = report.of("booking system", "page size")
    assert finding is not None and finding.status is status
    assert finding.details == {"cap": cap, "page_size": 100}
    assert (finding.advice is not None) is (status is Status.WARN)
    # the offset is probed under the cap too
    assert status_of(report, "booking system", "offset") is Status.OK
    assert not report.failed


@pytest.mark.parametrize("cap", [1, 3])
async def test_an_ignored_offset_is_found_under_a_small_cap(probe: Probe, cap: int) -> None:
    probe.sandbox.kross.add_history(probe.hotel_id, 300)
    probe.sandbox.kross.configure(max_page_size=cap, ignore_offset=True)

    report = await probe.run(hotel_id=probe.hotel_id)

    assert status_of(report, "booking system", "offset") is Status.WARN


async def test_a_cap_is_found_from_total_count_when_the_answer_does_not_echo_limit() -> None:
    class Answer:
        limit = None
        total_count = 300

    assert page_cap(Answer(), 50, 101) == 50
    assert page_cap(Answer(), 101, 101) is None
    Answer.total_count = 40
    assert page_cap(Answer(), 40, 101) is None


@pytest.mark.parametrize(
    ("first", "second", "applied", "verdict"),
    [
        (["1", "2", "3"], ["2", "3", "4"], 1, "honoured"),
        (["1", "2", "3"], ["2"], None, "honoured"),
        (["1"], [], 1, "honoured"),  # a single reservation
        (["1"], ["2"], 1, "honoured"),  # a cap of one row
        (["1", "2", "3"], ["1", "2", "3"], None, "ignored"),
        (["1"], ["1"], None, "ignored"),
        (["1", "2", "3"], ["1", "2", "3"], 0, "ignored"),
        (["1", "2", "3"], ["4", "5", "6"], 1, "unclear"),  # offset counted in pages?
        (["1", "2", "3"], [], 1, "unclear"),
    ],
)
def test_the_offset_verdict_compares_the_reads_at_offset_0_and_1(
    first: list[str], second: list[str], applied: int | None, verdict: str
) -> None:
    assert offset_verdict(first, second, applied) == verdict


async def test_a_refused_login_fails_the_probe_after_a_single_token_request(
    probe: Probe,
) -> None:
    probe.sandbox.kross.change_password(probe.hotel_id, "a-new-password-nobody-told-us")
    probe.sandbox.kross.configure(login_refusal="400")

    report = await probe.run(hotel_id=probe.hotel_id)

    assert status_of(report, "booking system", "login") is Status.FAIL
    assert probe.sandbox.kross.stats.tokens_issued[probe.hotel_id] == 0
    assert probe.sandbox.kross.stats.requests_by_operation["auth/get-token"] == 1
    assert report.failed


async def test_assumed_assistant_endpoints_that_are_missing_become_warnings_naming_the_step(
    probe: Probe,
) -> None:
    probe.sandbox.assistant.configure(undocumented_endpoints="absent")

    report = await probe.run(workspace_id=probe.workspace_id)

    listings = report.of("assistant platform", "listings")
    assert listings is not None and listings.status is Status.WARN
    assert listings.details["assumption_holds"] is False
    assert "step" in (listings.advice or "")
    assert not report.failed


async def test_present_assistant_endpoints_hold(
    probe: Probe,
) -> None:

    report = await probe.run(workspace_id=probe.workspace_id)

    for check in ("listings", "workspace secrets", "members", "usage"):
        assert status_of(report, "assistant platform", check) is Status.OK, check


@pytest.mark.parametrize("version", ["2022-06-28", "2025-09-03"])
async def test_the_notion_probe_names_the_workspace_and_finds_the_database(
    settings: Settings,
    sandbox: Sandbox,
    http_factory: Callable[[], httpx.AsyncClient],
    version: str,
) -> None:
    workspace = next(iter(sandbox.notion._workspaces.values()))
    report = Report()

    async with http_factory() as http:
        await probe_notion(
            settings.model_copy(update={"notion_version": version}),
            http,
            SecretStr(workspace.token),
            workspace.database_id,
            report,
        )

    assert status_of(report, "notes workspace", "integration") is Status.OK
    assert status_of(report, "notes workspace", "search") is Status.OK
    database = report.of("notes workspace", "apartments database")
    assert database is not None and database.status is Status.OK
    assert ("data source" in database.found) is (version >= "2025-09-03")


async def test_a_wrong_notion_token_is_a_failure_with_a_reconnect_hint(
    settings: Settings, http_factory: Callable[[], httpx.AsyncClient]
) -> None:
    report = Report()
    async with http_factory() as http:
        await probe_notion(settings, http, SecretStr("secret_not-a-token"), None, report)

    assert status_of(report, "notes workspace", "integration") is Status.FAIL


async def test_the_report_holds_no_secret(
    probe: Probe,
) -> None:
    report = await probe.run(hotel_id=probe.hotel_id, workspace_id=probe.workspace_id)

    text = json.dumps(report.as_dict())
    assert probe.settings.secret_keys is not None
    for secret in (
        probe.facility["password"],
        SANDBOX_PARTNER_API_KEY,
        SANDBOX_ASSISTANT_TOKEN,
        probe.settings.secret_keys.get_secret_value(),
    ):
        assert secret not in text


@pytest.mark.parametrize("place", ["data", "top", "nested"])
async def test_the_login_finding_names_where_the_token_came(
    probe: Probe,
    place: str,
) -> None:
    probe.sandbox.kross.configure(token_location=place)

    report = await probe.run(hotel_id=probe.hotel_id)

    login = report.of("booking system", "login")
    assert login is not None and login.status is Status.OK
    assert login.details["token_location"] == place


async def test_the_doctor_fails_without_the_consoles_address_and_warns_on_the_gateways(
    probe: Probe,
) -> None:
    """Invitations, password resets and notices carry links to the console's address."""
    without = probe.settings.model_copy(update={"public_url": None})
    report = await run_doctor(without, http_factory=probe.http_factory, clock=probe.clock)
    finding = report.of("local", "console address")
    assert finding is not None and finding.status is Status.FAIL
    assert "PMSGATE_PUBLIC_URL" in (finding.advice or "")

    gateway_only = without.model_copy(update={"gateway_public_url": "https://gw.example.test"})
    report = await run_doctor(gateway_only, http_factory=probe.http_factory, clock=probe.clock)
    assert status_of(report, "local", "console address") is Status.WARN
