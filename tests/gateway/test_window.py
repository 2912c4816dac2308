"""Paging the reservation window: bounded, and stopping on every way a server misbehaves.

The pages come from a small in-test server function (the upstream's stand-in), so each
paging rule is shown on its own; the whole gateway against the emulator is in
tests/e2e/test_reservation_window.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pmsgate.gateway.limiter import BudgetExhausted, Priority, YieldedToInteractive
from pmsgate.gateway.window import WindowPolicy, read_pages
from pmsgate.integrations.kross.client import KrossResult
from pmsgate.integrations.kross.errors import UnexpectedResponse, UpstreamUnavailable

pytestmark = pytest.mark.anyio


@dataclass
class Server:
    """A list server with switchable faults; it counts what it was asked."""

    total: int
    cap: int | None = None
    ignore_offset: bool = False
    omit_total: bool = False
    answer_offset: bool = True
    fail_from_call: int | None = None
    failure: Exception = field(default_factory=lambda: UpstreamUnavailable("down"))
    calls: list[tuple[int, int]] = field(default_factory=list)

    async def page(self, offset: int, limit: int) -> KrossResult:
        self.calls.append((offset, limit))
        if self.fail_from_call is not None and len(self.calls) >= self.fail_from_call:
            raise self.failure
        limit = min(limit, self.cap) if self.cap else limit
        start = 0 if self.ignore_offset else offset
        rows = [{"id_reservation": i} for i in range(start, min(start + limit, self.total))]
        return KrossResult(
            operation="reservations/get-list",
            data=rows,
            ruid="r-1",
            total_count=None if self.omit_total else self.total,
            limit=limit,
            offset=(start if self.answer_offset else None),
        )


async def read(
    server: Server, *, page_size: int = 100, max_pages: int = 20, cap: int = 5, whole: bool = False
):
    spent = 0

    async def permits() -> int:
        # One permit per page read, as the limiter would count them.
        nonlocal spent
        spent = len(server.calls)
        return spent

    return await read_pages(
        server.page,
        page_size=page_size,
        max_pages=max_pages,
        permit_cap=cap,
        spent=permits,
        whole=whole,
    )


async def test_a_list_that_fits_the_budget_is_read_whole():
    server = Server(total=250)
    pages = await read(server)
    assert len(pages.rows) == 250
    assert pages.pages == 3
    assert not pages.truncated


async def test_a_long_history_stops_at_the_budget_share_and_keeps_what_it_read():
    server = Server(total=1200)
    pages = await read(server, cap=5)
    assert len(server.calls) == 5
    assert len(pages.rows) == 500
    assert pages.truncated
    assert pages.reason == "budget_share"


async def test_the_page_limit_binds_when_lower_than_the_share():
    pages = await read(Server(total=1200), max_pages=2, cap=5)
    assert pages.pages == 2
    assert pages.reason == "page_limit"


async def test_a_server_that_ignores_offset_is_read_once_more_at_most():
    server = Server(total=300, ignore_offset=True)
    pages = await read(server)
    assert len(server.calls) == 2
    assert len(pages.rows) == 100
    assert pages.truncated
    assert pages.reason == "offset_ignored"


async def test_a_repeated_page_stops_paging_even_without_an_offset_in_the_answer():
    server = Server(total=300, ignore_offset=True, answer_offset=False, omit_total=True)
    pages = await read(server)
    assert len(server.calls) == 2
    assert pages.reason == "page_repeated"
    assert pages.truncated


async def test_without_total_count_paging_continues_only_while_pages_are_full():
    server = Server(total=250, omit_total=True)
    pages = await read(server)
    assert len(pages.rows) == 250
    assert len(server.calls) == 3
    assert not pages.truncated


async def test_without_total_count_a_full_last_page_is_reported_as_possibly_truncated():
    pages = await read(Server(total=1000, omit_total=True), cap=3)
    assert pages.truncated
    assert pages.reason == "budget_share"


async def test_a_page_capped_by_the_server_is_not_mistaken_for_the_last():
    server = Server(total=120, cap=50, omit_total=True)
    pages = await read(server, page_size=100)
    assert len(pages.rows) == 120
    assert server.calls == [(0, 100), (50, 100), (100, 100)]
    assert not pages.truncated


async def test_a_later_page_that_fails_keeps_the_pages_already_read():
    server = Server(total=500, fail_from_call=3)
    pages = await read(server)
    assert len(pages.rows) == 200
    assert pages.reason == "upstream"
    no_budget = Server(total=500, fail_from_call=2)
    no_budget.failure = BudgetExhausted(retry_after_s=10, window="minute")
    assert (await read(no_budget)).reason == "budget_exhausted"


async def test_a_refresh_ahead_of_need_that_cannot_read_the_window_whole_is_no_answer():
    # Background work: a truncated window must not replace the cached one (R7.8).
    with pytest.raises(BudgetExhausted) as share_spent:
        await read(Server(total=1200), cap=5, whole=True)
    assert share_spent.value.priority is Priority.BACKGROUND
    yielded = Server(total=500, fail_from_call=2)
    yielded.failure = YieldedToInteractive(
        retry_after_s=1, window="minute", priority=Priority.BACKGROUND
    )
    with pytest.raises(YieldedToInteractive):
        await read(yielded, whole=True)
    with pytest.raises(UpstreamUnavailable):
        await read(Server(total=500, fail_from_call=3), whole=True)
    # What the budget does not cut short is read as usual.
    assert len((await read(Server(total=250), whole=True)).rows) == 250
    assert (await read(Server(total=500, ignore_offset=True), whole=True)).truncated


async def test_a_first_page_that_fails_is_the_callers_failure():
    with pytest.raises(UpstreamUnavailable):
        await read(Server(total=10, fail_from_call=1))


async def test_data_that_is_not_a_list_is_an_unexpected_answer():
    async def page(offset: int, limit: int) -> KrossResult:
        return KrossResult(operation="reservations/get-list", data={"id_reservation": 1})

    async def none_spent() -> int:
        return 0

    with pytest.raises(UnexpectedResponse):
        await read_pages(page, page_size=10, max_pages=5, permit_cap=5, spent=none_spent)


async def test_the_budget_counts_permits_not_pages():
    # A token request and a retry took permits too: fewer pages fit.
    server = Server(total=1200)

    async def permits() -> int:
        return len(server.calls) + 2

    pages = await read_pages(server.page, page_size=100, max_pages=20, permit_cap=5, spent=permits)
    # Two permits went elsewhere: three pages make the five the share allows.
    assert pages.pages == 3
    assert await permits() == 5


@pytest.mark.parametrize(
    ("per_minute", "share", "max_pages", "cap"),
    [(10, 0.5, 20, 5), (10, 0.3, 20, 3), (1, 0.5, 20, 1), (100, 0.5, 20, 20), (10, 1.0, 4, 4)],
)
def test_the_page_cap_is_a_share_of_the_minute_and_never_zero(per_minute, share, max_pages, cap):
    policy = WindowPolicy(budget_share=share, max_pages=max_pages)
    assert policy.page_cap(per_minute) == cap
