"""The admin customer page's connection-health panel and the facility's tool-call log page.

Calls go through the real gateway routes with a minted key (or are recorded on the
process's call log at a moment of the injected ManualClock), then the usage-flush tick
writes them, as in production.
"""

from __future__ import annotations

import csv
import io
import json
import re

import httpx
import pytest

from pmsgate.gateway.call_log import CallLog
from pmsgate.gateway.facility_status import CAUSE_ACCEPTED_AGAIN
from pmsgate.gateway.scopes import TOOLS_READ
from pmsgate.jobs.usage import flush_gateway_usage
from pmsgate.web.connection_health import read_health
from tests.conftest import database_url as database_url  # both databases: see conftest.py
from tests.web.support import WebSandbox

pytestmark = pytest.mark.anyio

TOOL = "/v1/tools/get-in-house-guests"


async def get(client: httpx.AsyncClient, url: str, status: int = 200) -> str:
    answer = await client.get(url)
    assert answer.status_code == status, (url, answer.status_code, answer.text[:400])
    return answer.text


def calls_url(web: WebSandbox, query: str = "") -> str:
    return f"/console/customers/{web.student_id}/calls" + (f"?{query}" if query else "")


async def mint(web: WebSandbox, label: str = "assistant") -> str:
    _, raw = await web.gateway.facilities.mint_key(web.hotel_id, label, scopes=(TOOLS_READ,))
    return raw


def record(call_log: CallLog, facility_id: int, name: str, *, error: str | None = None) -> None:
    call = call_log.start(
        facility_id, kind="tool", name=name, transport="http", key_prefix="pgw_notakey0"
    )
    if error is None:
        call_log.answered(call, {"source": "cache", "age_s": 12.0, "stale": False})
    else:
        from pmsgate.errors import PmsgateError

        call_log.failed(call, PmsgateError("refused", code=error, status=422))


def rows(page: str) -> list[dict[str, str]]:
    """The call rows of the log page: name, outcome, freshness."""
    found = re.findall(
        r'<tr data-testid="call" data-name="([^"]+)" data-outcome="([^"]+)" '
        r'data-source="([^"]*)" data-freshness="([^"]+)">',
        page,
    )
    return [{"name": n, "outcome": o, "source": s, "freshness": f} for n, o, s, f in found]


# --- the health panel ---------------------------------------------------------------------------


async def test_the_health_panel_shows_history_last_success_token_counts_and_budget(
    web: WebSandbox,
) -> None:
    clock = web.enrolled.clock
    facility_id, call_log = await web.facility_id_and_call_log()
    record(call_log, facility_id, "check-availability")  # 7 days and 1 hour ago, below
    clock.advance(5 * 86400)
    record(call_log, facility_id, "check-availability", error="invalid_arguments")
    await web.gateway.facilities.mark_error(web.hotel_id, "password changed")
    clock.advance(2 * 86400 + 3600)
    await web.gateway.facilities.mark_connected(web.hotel_id, cause=CAUSE_ACCEPTED_AGAIN)
    raw = await mint(web)
    answer = await web.client.post(TOOL, json={}, headers={"Authorization": f"Bearer {raw}"})
    assert answer.status_code == 200, answer.text
    called_at = clock.now()
    await flush_gateway_usage(web.gateway)

    health = await read_health(web.web, await web.gateway.facilities.get(web.hotel_id))
    admin, _ = await web.signed_in("admin")
    page = await get(admin, f"/console/customers/{web.student_id}")

    counts = {p.label: (p.counts.calls, p.counts.errors) for p in health.periods}
    assert counts == {"24 h": (1, 0), "7 days": (2, 1)}
    assert health.last_success_at == called_at
    assert health.token_obtained_at == called_at  # the call needed the facility's first token
    assert [(c.before, c.after) for c in health.history][:2] == [
        ("error", "connected"),
        ("connected", "error"),
    ]
    assert health.history[0].cause == CAUSE_ACCEPTED_AGAIN
    assert health.history[1].reason == "password changed"
    assert health.status_since == called_at  # reconnected just before the call
    budget = {w.name: (w.used, w.limit) for w in health.budget}
    assert budget["minute"][1] == 10 and budget["hour"][1] == 300 and budget["day"][1] == 5000
    assert budget["minute"][0] >= 2  # the token request and the read
    # The panel on the admin customer page.
    assert 'data-testid="health-panel" data-status="connected"' in page
    assert 'data-period="24 h" data-calls="1" data-errors="0"' in page
    assert 'data-period="7 days" data-calls="2" data-errors="1"' in page
    assert page.count('data-testid="health-change"') >= 2
    assert 'data-testid="health-last-success"' in page and "none recorded" not in page
    assert f'href="/console/customers/{web.student_id}/calls"' in page
    assert raw not in page


# --- the log page -------------------------------------------------------------------------------


async def test_the_log_shows_the_latest_calls_with_outcome_and_freshness(web: WebSandbox) -> None:
    raw = await mint(web, label="production assistant")
    auth = {"Authorization": f"Bearer {raw}"}
    await web.client.post(TOOL, json={}, headers=auth)
    web.enrolled.clock.advance(65)
    await web.client.post(TOOL, json={}, headers=auth)
    await web.client.post("/v1/tools/check-availability", json={"arrival": "x"}, headers=auth)
    await flush_gateway_usage(web.gateway)
    admin, _ = await web.signed_in("admin")

    page = await get(admin, calls_url(web))
    only_errors = await get(admin, calls_url(web, "outcome=error"))
    one_tool = await get(admin, calls_url(web, "tool=get-in-house-guests"))

    assert rows(page) == [
        {"name": "check-availability", "outcome": "error", "source": "", "freshness": "none"},
        {"name": "get-in-house-guests", "outcome": "ok", "source": "cache", "freshness": "cached"},
        {
            "name": "get-in-house-guests",
            "outcome": "ok",
            "source": "upstream",
            "freshness": "fresh",
        },
    ]
    assert "cached, 1 min 5 s old" in page
    assert "fresh from the booking system" in page
    assert "production assistant" in page and raw[:12] in page and raw not in page
    assert 'data-testid="call-error-code">invalid_arguments<' in page
    assert [r["outcome"] for r in rows(only_errors)] == ["error"]
    assert {r["name"] for r in rows(one_tool)} == {"get-in-house-guests"}
    assert 'option value="get-in-house-guests" selected' in one_tool


async def test_the_time_range_is_read_in_the_readers_zone_and_pages_follow_a_cursor(
    web: WebSandbox,
) -> None:
    clock = web.enrolled.clock  # 2026-11-22 09:00 UTC = 10:00 in Rome
    facility_id, call_log = await web.facility_id_and_call_log()
    for index in range(55):
        record(call_log, facility_id, f"tool-{index:02d}")
        clock.advance(60)
    await call_log.flush()
    admin, _ = await web.signed_in("admin")

    first = await get(admin, calls_url(web))
    older = re.search(r'href="([^"]+)" data-testid="calls-older"', first)
    assert older is not None
    second = await get(admin, older.group(1).replace("&amp;", "&"))
    # 10:00 to 10:04 Rome time, both minutes included: five calls.
    window = await get(admin, calls_url(web, "since=2026-11-22T10:00&until=2026-11-22T10:04"))
    day = await get(admin, calls_url(web, "since=2026-11-22&until=2026-11-22"))
    before = await get(admin, calls_url(web, "until=2026-11-21"))

    assert len(rows(first)) == 50 and rows(first)[0]["name"] == "tool-54"
    assert [r["name"] for r in rows(second)] == [f"tool-{i:02d}" for i in range(4, -1, -1)]
    assert [r["name"] for r in rows(window)] == [f"tool-{i:02d}" for i in range(4, -1, -1)]
    assert len(rows(day)) == 50  # the first page of the day's 55
    assert rows(before) == []
    assert 'value="2026-11-22T10:00"' in window


@pytest.mark.parametrize(
    "query",
    [
        "outcome=nope",
        "since=yesterday",
        "until=2026-13-40",
        "tool=calendar%2Fget-calendar",
        "since=2026-11-23&until=2026-11-22",
        "tool=" + "x" * 120,
    ],
)
async def test_a_bad_filter_is_a_clear_422_page(web: WebSandbox, query: str) -> None:
    admin, _ = await web.signed_in("admin")
    page = await get(admin, calls_url(web, query), status=422)
    export = await admin.get(f"/console/customers/{web.student_id}/calls.csv?{query}")
    assert 'data-code="invalid_call_log_parameter"' in page
    assert '<link rel="stylesheet"' in page
    assert export.status_code == 422


async def test_the_selection_exports_as_csv_and_json_lines(web: WebSandbox) -> None:
    raw = await mint(web, label="=cmd|' /C calc'!A0")  # a label a spreadsheet would run
    auth = {"Authorization": f"Bearer {raw}"}
    await web.client.post(TOOL, json={"date": "2026-11-23"}, headers=auth)
    await web.client.post(TOOL, json={"date": "bad"}, headers=auth)
    await flush_gateway_usage(web.gateway)
    admin, _ = await web.signed_in("admin")
    base = f"/console/customers/{web.student_id}/calls"
    as_csv = await admin.get(f"{base}.csv?outcome=ok")
    as_jsonl = await admin.get(f"{base}.jsonl")

    assert as_csv.status_code == 200
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert "attachment" in as_csv.headers["content-disposition"]
    table = list(csv.DictReader(io.StringIO(as_csv.text.lstrip("\ufeff"))))
    assert [(r["name"], r["outcome"], r["source"]) for r in table] == [
        ("get-in-house-guests", "ok", "upstream")
    ]
    assert json.loads(table[0]["arguments"]) == {"date": "2026-11-23"}
    assert table[0]["key_label"].startswith("'=")  # never a formula
    lines = [json.loads(line) for line in as_jsonl.text.splitlines()]
    assert [(line["outcome"], line["error_code"]) for line in lines] == [
        ("error", "invalid_arguments"),
        ("ok", None),
    ]
    assert set(lines[0]) == {
        "at", "kind", "name", "transport", "key_prefix", "key_label", "outcome",
        "error_code", "status", "source", "age_s", "latency_ms", "arguments",
    }  # fmt: skip
    assert raw not in as_csv.text + as_jsonl.text


async def test_only_an_admin_sees_a_facilitys_call_log(web: WebSandbox) -> None:
    customer, _ = await web.signed_in("customer")
    refused = await get(customer, calls_url(web), status=403)
    export = await customer.get(f"/console/customers/{web.student_id}/calls.jsonl")
    anonymous = await web.client.get(calls_url(web))
    own_page = await get(customer, f"/console/customers/{web.student_id}")
    assert 'data-code="forbidden"' in refused
    assert export.status_code == 403
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login")
    assert 'data-testid="health-panel"' not in own_page
