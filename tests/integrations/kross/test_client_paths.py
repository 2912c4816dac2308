"""Alternate operation paths: tried once after "no such operation", remembered, never after a
timeout. The emulator's grouped layout is tested end to end in tests/e2e; these use
``httpx.MockTransport`` for the answer shapes it does not produce (HTML 404 pages, a lost
write, an operation missing everywhere)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
import structlog

from pmsgate.clock import ManualClock
from pmsgate.config import DEFAULT_USER_AGENT
from pmsgate.integrations.kross.client import KrossClient
from pmsgate.integrations.kross.errors import (
    InvalidRequest,
    UnknownOperation,
    UpstreamUnavailable,
    WriteOutcomeUnknown,
)
from pmsgate.integrations.kross.operations import load_operations

pytestmark = pytest.mark.anyio

SPEC = "get-check-in-instructions"
GROUPED = "reservations/get-check-in-instructions"
OK = {"data": {"id_room_type": 1}, "ruid": "r"}
NO_SUCH_OPERATION = {"error_code": "OPERATION_NOT_FOUND", "error_message": "no", "ruid": "r"}


class Upstream:
    """A fake network: answers by path, records every request and every permit taken."""

    def __init__(self, answers: dict[str, Callable[[httpx.Request], httpx.Response]]) -> None:
        self.answers = answers
        self.paths: list[str] = []
        self.permits = 0

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/v5/")
        self.paths.append(path)
        return self.answers[path](request)

    async def permit(self) -> None:
        self.permits += 1

    def client(self, clock: ManualClock) -> KrossClient:
        return KrossClient(
            httpx.AsyncClient(transport=httpx.MockTransport(self.handler)),
            base_url="http://kross.fake",
            operations=load_operations(),
            user_agent=DEFAULT_USER_AGENT,
            clock=clock,
        )


def answer(status: int, body: object = None, **kwargs: object) -> Callable[..., httpx.Response]:
    def respond(request: httpx.Request) -> httpx.Response:
        if body is None:
            return httpx.Response(status, **kwargs)  # type: ignore[arg-type]
        return httpx.Response(status, json=body, **kwargs)  # type: ignore[arg-type]

    return respond


def lost(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("simulated", request=request)


async def test_no_such_operation_tries_the_alternate_once_and_remembers_it(
    clock: ManualClock,
) -> None:
    upstream = Upstream({SPEC: answer(404, NO_SUCH_OPERATION), GROUPED: answer(200, OK)})
    client = upstream.client(clock)
    with structlog.testing.capture_logs() as logs:
        first = await client.call(SPEC, {"id_room_type": 1}, "tok", before_attempt=upstream.permit)
        await client.call(SPEC, {"id_room_type": 2}, "tok", before_attempt=upstream.permit)
    assert first.data == OK["data"]
    assert upstream.paths == [SPEC, GROUPED, GROUPED]
    assert upstream.permits == 3  # every request took its permit
    assert client.resolved_paths() == {SPEC: GROUPED}
    fallbacks = [e for e in logs if e["event"] == "kross_path_fallback"]
    assert [(e["operation"], e["path"]) for e in fallbacks] == [(SPEC, GROUPED)]


async def test_an_operation_found_on_its_spec_path_never_tries_another(clock: ManualClock) -> None:
    upstream = Upstream({SPEC: answer(200, OK)})
    client = upstream.client(clock)
    await client.call(SPEC, {}, "tok", before_attempt=upstream.permit)
    await client.call(SPEC, {}, "tok", before_attempt=upstream.permit)
    assert upstream.paths == [SPEC, SPEC]
    assert client.resolved_paths() == {SPEC: SPEC}


async def test_an_html_404_page_counts_as_no_such_operation(clock: ManualClock) -> None:
    page = answer(404, text="<!DOCTYPE html><title>Not Found</title>")
    upstream = Upstream({SPEC: page, GROUPED: answer(200, OK)})
    await upstream.client(clock).call(SPEC, {}, "tok")
    assert upstream.paths == [SPEC, GROUPED]


async def test_a_json_404_whose_code_repeats_the_status_tries_the_alternate_once(
    clock: ManualClock,
) -> None:
    no_such = {"error_code": 404, "error_message": "No such operation.", "ruid": "r"}
    upstream = Upstream({SPEC: answer(404, no_such), GROUPED: answer(200, OK)})
    client = upstream.client(clock)
    first = await client.call(SPEC, {}, "tok", before_attempt=upstream.permit)
    await client.call(SPEC, {}, "tok", before_attempt=upstream.permit)
    assert first.data == OK["data"]
    assert upstream.paths == [SPEC, GROUPED, GROUPED]
    assert upstream.permits == 3
    assert client.resolved_paths() == {SPEC: GROUPED}


async def test_a_missing_object_is_not_a_missing_operation(clock: ManualClock) -> None:
    missing = {"error_code": "NOT_FOUND", "error_message": "no such room type", "ruid": "r"}
    upstream = Upstream({SPEC: answer(404, missing), GROUPED: answer(200, OK)})
    client = upstream.client(clock)
    with pytest.raises(InvalidRequest) as caught:
        await client.call(SPEC, {"id_room_type": 99}, "tok")
    assert caught.value.status == 404
    assert upstream.paths == [SPEC]
    # the refusal proves the operation lives there
    assert client.resolved_paths() == {SPEC: SPEC}


async def test_an_operation_missing_on_every_path_costs_one_request_per_path_per_call(
    clock: ManualClock,
) -> None:
    upstream = Upstream({SPEC: answer(404, NO_SUCH_OPERATION), GROUPED: answer(404, text="no")})
    client = upstream.client(clock)
    for _ in range(2):
        with pytest.raises(UnknownOperation) as caught:
            await client.call(SPEC, {}, "tok", before_attempt=upstream.permit)
        # the spec path's answer is the one reported
        assert caught.value.upstream_code == "OPERATION_NOT_FOUND"
    assert upstream.paths == [SPEC, GROUPED, SPEC, GROUPED]
    assert upstream.permits == 4
    assert client.resolved_paths() == {}


async def test_a_retry_after_a_transient_failure_starts_on_the_path_tried_last(
    clock: ManualClock,
) -> None:
    upstream = Upstream({SPEC: answer(404, NO_SUCH_OPERATION), GROUPED: answer(503, text="busy")})
    client = upstream.client(clock)
    with pytest.raises(UpstreamUnavailable):
        await client.call(SPEC, {}, "tok")
    upstream.answers[GROUPED] = answer(200, OK)
    await client.call(SPEC, {}, "tok")
    # the spec path is not paid for again by the retry
    assert upstream.paths == [SPEC, GROUPED, GROUPED]
    assert client.resolved_paths() == {SPEC: GROUPED}


async def test_a_write_answered_no_such_operation_is_sent_once_to_the_alternate(
    clock: ManualClock,
) -> None:
    upstream = Upstream(
        {
            "check-in-guest": answer(404, NO_SUCH_OPERATION),
            "reservations/check-in-guest": answer(200, OK),
        }
    )
    client = upstream.client(clock)
    result = await client.call("check-in-guest", {"id_reservation": 1}, "tok")
    assert result.data == OK["data"]
    assert upstream.paths == ["check-in-guest", "reservations/check-in-guest"]


async def test_a_write_whose_answer_is_lost_is_never_sent_to_another_path(
    clock: ManualClock,
) -> None:
    upstream = Upstream({"check-in-guest": lost, "reservations/check-in-guest": answer(200, OK)})
    client = upstream.client(clock)
    with pytest.raises(WriteOutcomeUnknown):
        await client.call("check-in-guest", {"id_reservation": 1}, "tok")
    assert upstream.paths == ["check-in-guest"]
    assert client.resolved_paths() == {}


async def test_paths_are_remembered_for_every_facility_of_the_client(clock: ManualClock) -> None:
    upstream = Upstream({SPEC: answer(404, NO_SUCH_OPERATION), GROUPED: answer(200, OK)})
    client = upstream.client(clock)
    await client.call(SPEC, {}, "token-of-facility-a")
    await client.call(SPEC, {}, "token-of-facility-b")
    assert upstream.paths == [SPEC, GROUPED, GROUPED]
