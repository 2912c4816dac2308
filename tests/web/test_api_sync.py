"""POST /api/{assistant}/sync-knowledge and its job endpoints, through HTTP on the emulators."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.support.answers import assert_error
from tests.web.support import WebSandbox, csrf, sync_knowledge, web_sandbox

pytestmark = pytest.mark.anyio

# Seed 7, facility 1: four apartments, one page (Magnolia) without "how to reach".
DRY_RUN_COUNTERS = {
    "apartments": 4,
    "unresolvedApartments": 0,
    "incompleteTemplates": 1,
    "failed": 0,
}
OTHER_STUDENT = "stu-other"


@asynccontextmanager
async def sync_web(database_url: str, **options: Any) -> AsyncIterator[WebSandbox]:
    """The web app over the seeded customer with four apartments."""
    async with web_sandbox(database_url, seed=7, student_index=1, **options) as web:
        yield web


@pytest.fixture
async def web(database_url: str) -> AsyncIterator[WebSandbox]:
    """The web app over the seeded customer with four apartments."""
    async with sync_web(database_url) as sandbox:
        yield sandbox


async def test_a_dry_run_answers_the_specification_counters(web: WebSandbox) -> None:
    client, token = await web.signed_in("customer")

    answer = await sync_knowledge(client, web.assistant, token)

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert {key: body[key] for key in DRY_RUN_COUNTERS} == DRY_RUN_COUNTERS
    assert body["status"] == "succeeded" and body["commit"] is False
    assert body["jobId"] and body["statusUrl"].endswith(body["jobId"])
    assert answer.headers["cache-control"] == "no-store"


async def test_a_commit_answers_the_specification_counters(web: WebSandbox) -> None:
    client, token = await web.signed_in("customer")

    answer = await sync_knowledge(client, web.assistant, token, commit=True)

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "succeeded" and body["commit"] is True
    for counter in (
        "created",
        "failed",
        "blockedByTemplate",
        "directoriesCreated",
        "updated",
        "unchanged",
    ):
        assert isinstance(body[counter], int), counter
    # Three complete templates get a directory and their nodes; Magnolia is blocked.
    assert (body["failed"], body["blockedByTemplate"], body["directoriesCreated"]) == (0, 1, 3)
    assert body["created"] > 0 and body["updated"] == 0


async def test_the_student_id_names_the_assistant_too(web: WebSandbox) -> None:
    client, token = await web.signed_in("customer")

    answer = await sync_knowledge(client, web.student_id, token)

    assert answer.status_code == 200, answer.text
    assert answer.json()["apartments"] == 4


async def test_an_admin_may_sync_any_customer(web: WebSandbox) -> None:
    client, token = await web.signed_in("admin")

    answer = await sync_knowledge(client, web.assistant, token)

    assert answer.status_code == 200, answer.text


async def test_without_a_session_cookie_the_sync_is_refused_with_401(web: WebSandbox) -> None:
    answer = await web.client.post(f"/api/{web.assistant}/sync-knowledge", json={"commit": False})

    assert_error(answer, 401, "not_authenticated")
    assert await web.web.sync_jobs.latest(web.student_id) is None


async def test_without_the_csrf_token_the_sync_is_refused_with_403(web: WebSandbox) -> None:
    client, _ = await web.signed_in("customer")

    answer = await sync_knowledge(client, web.assistant, commit=True)

    assert_error(answer, 403, "csrf_failed")
    assert await web.web.sync_jobs.latest(web.student_id) is None


async def test_a_customer_cannot_sync_another_customer(web: WebSandbox) -> None:
    await web.bare_customer(OTHER_STUDENT)
    client, token = await web.signed_in("customer", student_id=OTHER_STUDENT)

    by_slug = await sync_knowledge(client, web.assistant, token)
    by_id = await sync_knowledge(client, web.student_id, token)

    for answer in (by_slug, by_id):
        assert_error(answer, 403, "forbidden")
    assert await web.web.sync_jobs.latest(web.student_id) is None


async def test_an_unknown_assistant_is_403_for_a_customer_and_404_for_an_admin(
    web: WebSandbox,
) -> None:
    customer, customer_token = await web.signed_in("customer")
    admin, admin_token = await web.signed_in("admin")

    hidden = await sync_knowledge(customer, "nobody-here", customer_token)
    unknown = await sync_knowledge(admin, "nobody-here", admin_token)

    assert_error(hidden, 403, "forbidden")
    assert_error(unknown, 404, "customer_not_found")


@pytest.mark.parametrize(
    "body", [{}, {"commit": "true"}, {"commit": 1}, {"commit": False, "extra": 1}, []]
)
async def test_a_malformed_body_is_a_422_in_the_service_error_shape(
    web: WebSandbox, body: Any
) -> None:
    client, token = await web.signed_in("customer")

    answer = await client.post(
        f"/api/{web.assistant}/sync-knowledge", json=body, headers=csrf(token)
    )

    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_input" and error["hint"]
    assert await web.web.sync_jobs.latest(web.student_id) is None


async def test_wait_false_answers_202_and_the_status_endpoint_later_shows_the_counters(
    web: WebSandbox,
) -> None:
    client, token = await web.signed_in("customer")

    started = await client.post(
        f"/api/{web.assistant}/sync-knowledge?wait=false",
        json={"commit": True},
        headers=csrf(token),
    )

    assert started.status_code == 202, started.text
    body = started.json()
    job_id = body["jobId"]
    assert body["status"] in ("queued", "running")
    assert set(body["progress"]) == {"done", "total"}
    assert started.headers["location"] == body["statusUrl"]
    assert body["statusUrl"] == f"/api/{web.assistant}/sync-knowledge/{job_id}"

    await web.web.sync_jobs.wait(job_id)
    polled = await client.get(body["statusUrl"])

    assert polled.status_code == 200
    job = polled.json()
    assert (job["jobId"], job["status"], job["commit"]) == (job_id, "succeeded", True)
    assert job["counters"]["directoriesCreated"] == 3
    assert job["progress"] == {"done": 4, "total": 4}
    latest = await client.get(f"/api/{web.assistant}/sync-knowledge")
    assert latest.status_code == 200 and latest.json()["jobId"] == job_id


async def test_a_sync_still_running_when_the_time_is_up_answers_202_with_the_job(
    database_url: str,
) -> None:
    async with sync_web(database_url, settings_overrides={"sync_max_duration_s": 0.05}) as web:
        client, token = await web.signed_in("customer")
        web.sleep.close()  # the sync waits on the notes throttle: it cannot finish in time

        answer = await sync_knowledge(client, web.assistant, token, commit=True)

        assert answer.status_code == 202, answer.text
        job_id = answer.json()["jobId"]
        assert answer.headers["location"].endswith(f"/sync-knowledge/{job_id}")
        running = await client.get(answer.headers["location"])
        assert running.json()["status"] in ("queued", "running")

        web.sleep.open()
        await web.web.sync_jobs.wait(job_id)
        done = await client.get(answer.headers["location"])
        assert done.json()["status"] == "succeeded"


async def test_a_second_start_while_a_sync_runs_is_a_409_naming_the_running_job(
    web: WebSandbox,
) -> None:
    client, token = await web.signed_in("customer")
    web.sleep.close()
    first = await client.post(
        f"/api/{web.assistant}/sync-knowledge?wait=false",
        json={"commit": True},
        headers=csrf(token),
    )
    assert first.status_code == 202

    second = await sync_knowledge(client, web.assistant, token)

    assert second.status_code == 409
    error = second.json()["error"]
    assert error["code"] == "sync_already_running"
    assert error["jobId"] == first.json()["jobId"]
    assert error["statusUrl"] == first.json()["statusUrl"]
    web.sleep.open()
    assert (await web.web.sync_jobs.wait(error["jobId"])).status == "succeeded"


async def test_a_customer_reads_only_its_own_jobs(web: WebSandbox) -> None:
    await web.bare_customer(OTHER_STUDENT)
    owner, token = await web.signed_in("customer")
    done = await sync_knowledge(owner, web.assistant, token)
    job_id = done.json()["jobId"]
    stranger, _ = await web.signed_in("customer", student_id=OTHER_STUDENT)

    theirs = await stranger.get(f"/api/{web.assistant}/sync-knowledge/{job_id}")
    under_own_name = await stranger.get(f"/api/{OTHER_STUDENT}/sync-knowledge/{job_id}")
    latest_of_other = await stranger.get(f"/api/{web.assistant}/sync-knowledge")
    nothing_yet = await stranger.get(f"/api/{OTHER_STUDENT}/sync-knowledge")
    anonymous = await web.client.get(f"/api/{web.assistant}/sync-knowledge/{job_id}")

    assert theirs.status_code == 403
    assert_error(under_own_name, 404, "sync_job_not_found")
    assert latest_of_other.status_code == 403
    assert nothing_yet.status_code == 404
    assert anonymous.status_code == 401


async def test_a_customer_without_notion_gets_a_409_at_once_and_no_job(database_url: str) -> None:
    async with sync_web(database_url, with_notion=False) as web:
        client, token = await web.signed_in("customer")

        answer = await sync_knowledge(client, web.assistant, token)

        assert_error(answer, 409, "notes_not_connected")
        assert await web.web.sync_jobs.latest(web.student_id) is None


async def test_the_status_endpoint_shows_integrations_listings_and_the_latest_sync(
    web: WebSandbox,
) -> None:
    client, token = await web.signed_in("customer")
    before = await client.get(f"/api/{web.assistant}/status")
    await sync_knowledge(client, web.assistant, token)

    after = await client.get(f"/api/{web.assistant}/status")

    assert before.status_code == 200, before.text
    state = before.json()
    assert state["studentId"] == web.student_id and state["assistant"] == web.assistant
    assert state["pms"]["status"] == "connected" and state["pms"]["lastError"] is None
    assert state["pms"]["hotelId"] == web.hotel_id
    assert state["notes"]["status"] == "connected"
    assert (state["apartments"], state["listings"]) == (4, 4)
    assert state["latestSync"] is None
    latest = after.json()["latestSync"]
    assert latest["status"] == "succeeded" and latest["counters"]["apartments"] == 4
