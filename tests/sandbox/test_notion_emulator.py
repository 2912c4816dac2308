"""The notes emulator speaks the Notion API shapes, enforces its limits, seeds faithful pages."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from notion_client import AsyncClient as NotionSdk
from notion_client.helpers import async_collect_paginated_api

from pmsgate.clock import ManualClock
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.sandbox.notion.app import create_notion_app
from pmsgate.sandbox.notion.seed import CANONICAL_SECTIONS, SECTION_TITLES
from pmsgate.sandbox.notion.store import Block, NotionStore, Page
from tests.support.asgi import asgi_client
from tests.support.notion_sdk import richest_workspace, text

pytestmark = pytest.mark.anyio

VERSION = "2022-06-28"
WIFI_WORDS = re.compile(r"wi-?fi|internet", re.IGNORECASE)


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
def store(clock: ManualClock) -> NotionStore:
    return NotionStore(seed=3, clock=clock)


@pytest.fixture
async def http(store: NotionStore) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_notion_app(store), "http://notes.test") as client:
        yield client


def headers(token: str, version: str | None = VERSION) -> dict[str, str]:
    result = {"Authorization": f"Bearer {token}"}
    if version is not None:
        result["Notion-Version"] = version
    return result


def para(content: str) -> dict[str, Any]:
    return {"object": "block", "type": "paragraph", "paragraph": {"rich_text": text(content)}}


def tog(title: str, children: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "toggle", "toggle": {"rich_text": text(title), "children": children}}


def plain(node: Page | Block) -> str:
    if isinstance(node, Page):
        return node.title
    return "".join(item["plain_text"] for item in node.content.get("rich_text", []))


def walk(store: NotionStore, node: Page | Block) -> Iterator[Block]:
    for child in store.live_children(node):
        yield child
        yield from walk(store, child)


def page_of(store: NotionStore, truth: dict[str, Any], token: str) -> Page:
    return store.page(store.authenticate(token), truth["page_id"])


async def error_code(answer: httpx.Response) -> str:
    body = answer.json()
    assert body["object"] == "error"
    assert body["status"] == answer.status_code
    assert isinstance(body["message"], str) and body["message"]
    code: str = body["code"]
    return code


# --- seed ----------------------------------------------------------------------------------------


async def test_the_same_seed_gives_the_same_workspaces_pages_and_blocks(clock: ManualClock):
    first, second = NotionStore(seed=5, clock=clock), NotionStore(seed=5, clock=clock)
    assert first.workspaces() == second.workspaces()
    ws = first.workspaces()[0]
    page_a = page_of(first, ws["pages"][0], ws["token"])
    page_b = page_of(second, ws["pages"][0], ws["token"])
    tree_a = [(b.id, b.type, plain(b)) for b in walk(first, page_a)]
    tree_b = [(b.id, b.type, plain(b)) for b in walk(second, page_b)]
    assert tree_a == tree_b
    assert NotionStore(seed=6, clock=clock).workspaces() != first.workspaces()


async def test_one_workspace_per_booking_system_facility_and_one_page_per_apartment(
    clock: ManualClock,
):
    kross = KrossStore(seed=7, clock=clock)
    store = NotionStore(seed=7, kross=kross)
    workspaces = store.workspaces()
    assert [w["hotel_id"] for w in workspaces] == [f.hotel_id for f in kross.facilities()]
    assert len({w["token"] for w in workspaces}) == len(workspaces)
    for ws, facility in zip(workspaces, kross.facilities(), strict=True):
        apartments = {a.id_room_type: a for a in facility.apartments.values()}
        assert {p["pms_room_type_id"] for p in ws["pages"]} == set(apartments)
        for page in ws["pages"]:
            apartment = apartments[page["pms_room_type_id"]]
            assert page["title"] == apartment.name
            wifi_manual = next(s.body for s in apartment.house_manual if s.title == "WiFi")
            assert page["wifi"]["network"] in wifi_manual
            assert page["wifi"]["password"] in wifi_manual


async def test_every_quirk_is_seeded_and_one_page_is_clean(store: NotionStore):
    pages = [p for ws in store.workspaces() for p in ws["pages"]]
    assert all(30 <= p["toggle_count"] <= 40 for p in pages)
    assert any(p["sections_missing"] for p in pages)
    assert any("wifi" in p["sections_missing"] for p in pages)
    assert any(p["first_toggle_mentions_wifi"] for p in pages)
    assert any(p["wifi_callout_words"] for p in pages)
    assert any(p["wifi_on_page"] and not p["wifi_title_complete"] for p in pages)
    assert any(p["wifi_title_complete"] for p in pages)
    assert any(p["stray_wifi_mentions"] for p in pages)
    assert any(p["long_toggle"] for p in pages)
    assert any("heading_2" in p["section_kinds"].values() for p in pages)
    assert {p["language"] for p in pages} == {"it", "en", "bi"}
    assert any(
        not p["sections_missing"]
        and p["wifi_title_complete"]
        and not p["wifi_callout_words"]
        and not p["first_toggle_mentions_wifi"]
        and not p["stray_wifi_mentions"]
        and set(p["section_kinds"].values()) == {"toggle"}
        for p in pages
    )


@pytest.mark.parametrize("seed", [1, 3, 11])
async def test_the_ground_truth_describes_each_page_content(clock: ManualClock, seed: int):
    store = NotionStore(seed=seed, clock=clock)
    for ws in store.workspaces():
        for truth in ws["pages"]:
            page = page_of(store, truth, ws["token"])
            top = store.live_children(page)
            toggles = [b for b in top if b.type == "toggle"]
            titles = {plain(b): b for b in top if b.type in ("toggle", "heading_2")}
            assert len(toggles) == truth["toggle_count"]
            assert set(truth["sections_present"]) | set(truth["sections_missing"]) == set(
                CANONICAL_SECTIONS
            )
            for key, title in truth["section_titles"].items():
                assert titles[title].type == truth["section_kinds"][key]
            for key in truth["sections_missing"]:
                variants = {t for lang in SECTION_TITLES[key].values() for t in lang}
                assert not variants & set(titles)
            wifi = truth["wifi"]
            if truth["wifi_on_page"]:
                section = titles[truth["section_titles"]["wifi"]]
                body = [plain(b) for b in walk(store, section)]
                assert any(wifi["network"] in line for line in body)
                assert any(wifi["password"] in line for line in body)
                has_both = wifi["network"] in plain(section) and wifi["password"] in plain(section)
                assert has_both == truth["wifi_title_complete"]
                callouts = [plain(b) for b in walk(store, section) if b.type == "callout"]
                worded = any(WIFI_WORDS.search(c) for c in callouts)
                assert worded == truth["wifi_callout_words"]
            first_body = " ".join(plain(b) for b in walk(store, toggles[0]))
            assert bool(WIFI_WORDS.search(first_body)) == truth["first_toggle_mentions_wifi"]
            wifi_toggle = titles.get(truth["section_titles"].get("wifi", ""))
            elsewhere = [
                plain(b)
                for t in toggles
                if t is not wifi_toggle and t is not toggles[0]
                for b in walk(store, t)
            ]
            stray = any(WIFI_WORDS.search(line) for line in elsewhere)
            assert stray == truth["stray_wifi_mentions"]
            longest = max(len(store.live_children(t)) for t in toggles)
            assert (longest > 100) == truth["long_toggle"]


async def test_seeded_texts_hold_no_contact_data(store: NotionStore):
    for ws in store.workspaces():
        for truth in ws["pages"]:
            page = page_of(store, truth, ws["token"])
            for block in walk(store, page):
                line = plain(block)
                assert "@" not in line
                assert not re.search(r"\+\d|\d{3}[ .-]?\d{3}[ .-]?\d{3,}", line)


# --- headers and tokens --------------------------------------------------------------------------


async def test_a_request_without_notion_version_is_refused_with_missing_version(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    answer = await http.get(
        f"/v1/pages/{ws['pages'][0]['page_id']}", headers=headers(ws["token"], None)
    )
    assert answer.status_code == 400
    assert await error_code(answer) == "missing_version"


async def test_an_unknown_notion_version_is_a_validation_error(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    answer = await http.get(
        f"/v1/pages/{ws['pages'][0]['page_id']}", headers=headers(ws["token"], "1999-01-01")
    )
    assert answer.status_code == 400
    assert await error_code(answer) == "validation_error"


@pytest.mark.parametrize("authorization", [None, "Bearer ntn_wrong", "Basic abc"])
async def test_a_missing_or_unknown_token_is_unauthorized(
    http: httpx.AsyncClient, store: NotionStore, authorization: str | None
):
    ws = richest_workspace(store)
    sent = {"Notion-Version": VERSION}
    if authorization:
        sent["Authorization"] = authorization
    answer = await http.get(f"/v1/pages/{ws['pages'][0]['page_id']}", headers=sent)
    assert answer.status_code == 401
    assert await error_code(answer) == "unauthorized"


async def test_a_token_sees_only_its_own_workspace(http: httpx.AsyncClient, store: NotionStore):
    mine, other = store.workspaces()[:2]
    answer = await http.get(
        f"/v1/pages/{other['pages'][0]['page_id']}", headers=headers(mine["token"])
    )
    assert answer.status_code == 404
    assert await error_code(answer) == "object_not_found"


async def test_an_unknown_path_is_an_invalid_request_url(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    answer = await http.get("/v1/nothing/here", headers=headers(ws["token"]))
    assert answer.status_code == 400
    assert await error_code(answer) == "invalid_request_url"


async def test_a_malformed_id_is_a_validation_error(http: httpx.AsyncClient, store: NotionStore):
    ws = richest_workspace(store)
    answer = await http.get("/v1/blocks/not-a-uuid", headers=headers(ws["token"]))
    assert answer.status_code == 400
    assert await error_code(answer) == "validation_error"


# --- reads ---------------------------------------------------------------------------------------


async def test_the_database_query_pages_with_start_cursor(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    url = f"/v1/databases/{ws['database_id']}/query"
    seen: list[str] = []
    body: dict[str, Any] = {"page_size": 2}
    while True:
        answer = await http.post(url, headers=headers(ws["token"]), json=body)
        assert answer.status_code == 200, answer.text
        data = answer.json()
        assert data["object"] == "list" and data["type"] == "page_or_database"
        assert len(data["results"]) <= 2
        seen += [row["id"] for row in data["results"]]
        if not data["has_more"]:
            assert data["next_cursor"] is None
            break
        body = {"page_size": 2, "start_cursor": data["next_cursor"]}
    assert seen == [p["page_id"] for p in ws["pages"]]


async def test_a_page_carries_its_title_and_room_type_properties(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    truth = ws["pages"][0]
    answer = await http.get(f"/v1/pages/{truth['page_id']}", headers=headers(ws["token"]))
    page = answer.json()
    assert page["object"] == "page"
    assert page["parent"] == {"type": "database_id", "database_id": ws["database_id"]}
    assert page["properties"]["Name"]["title"][0]["plain_text"] == truth["title"]
    assert page["properties"]["PMS room type id"]["number"] == truth["pms_room_type_id"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z", page["last_edited_time"])


async def test_from_version_2025_09_03_a_database_is_queried_through_its_data_source(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    sent = headers(ws["token"], "2025-09-03")
    database = (await http.get(f"/v1/databases/{ws['database_id']}", headers=sent)).json()
    assert database["data_sources"] == [{"id": ws["data_source_id"], "name": "Apartments"}]
    assert "properties" not in database
    answer = await http.post(f"/v1/data_sources/{ws['data_source_id']}/query", headers=sent)
    rows = answer.json()["results"]
    assert [r["id"] for r in rows] == [p["page_id"] for p in ws["pages"]]
    assert rows[0]["parent"]["type"] == "data_source_id"


async def test_children_come_one_level_at_a_time_in_pages_of_at_most_100(
    http: httpx.AsyncClient, store: NotionStore
):
    ws, truth = next((w, p) for w in store.workspaces() for p in w["pages"] if p["long_toggle"])
    sent = headers(ws["token"])
    top = (await http.get(f"/v1/blocks/{truth['page_id']}/children", headers=sent)).json()
    assert all(b["object"] == "block" for b in top["results"])
    assert all(
        b["parent"] == {"type": "page_id", "page_id": truth["page_id"]} for b in top["results"]
    )
    page = page_of(store, truth, ws["token"])
    long_toggle = max(store.live_children(page), key=lambda b: len(store.live_children(b)))
    url = f"/v1/blocks/{long_toggle.id}/children"
    first = (await http.get(url, headers=sent)).json()
    assert len(first["results"]) == 100 and first["has_more"] is True
    rest = (await http.get(url, headers=sent, params={"start_cursor": first["next_cursor"]})).json()
    assert rest["has_more"] is False
    assert len(first["results"]) + len(rest["results"]) == len(store.live_children(long_toggle))
    too_big = await http.get(url, headers=sent, params={"page_size": 101})
    assert too_big.status_code == 400
    assert await error_code(too_big) == "validation_error"


async def test_a_page_is_also_a_child_page_block(http: httpx.AsyncClient, store: NotionStore):
    ws = richest_workspace(store)
    truth = ws["pages"][0]
    block = (await http.get(f"/v1/blocks/{truth['page_id']}", headers=headers(ws["token"]))).json()
    assert block["type"] == "child_page"
    assert block["child_page"] == {"title": truth["title"]}
    assert block["has_children"] is True


# --- appends -------------------------------------------------------------------------------------


async def test_an_append_of_two_levels_returns_the_new_first_level_blocks(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    page_id = ws["pages"][0]["page_id"]
    body = {"children": [tog("Nuova sezione", [para("uno"), para("due")]), para("fine")]}
    answer = await http.patch(
        f"/v1/blocks/{page_id}/children", headers=headers(ws["token"]), json=body
    )
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["type"] for r in results] == ["toggle", "paragraph"]
    assert results[0]["has_children"] is True
    assert results[0]["toggle"]["rich_text"][0]["plain_text"] == "Nuova sezione"
    assert results[0]["toggle"]["rich_text"][0]["annotations"]["bold"] is False
    children = await http.get(
        f"/v1/blocks/{results[0]['id']}/children", headers=headers(ws["token"])
    )
    assert [b["paragraph"]["rich_text"][0]["plain_text"] for b in children.json()["results"]] == [
        "uno",
        "due",
    ]
    stats = (await http.get("/_sandbox/stats")).json()
    assert stats["appends"] == {
        "requests": 1,
        "max_children": 2,
        "max_depth": 2,
        "max_elements": 4,
    }


def _deep() -> list[dict[str, Any]]:
    return [tog("uno", [tog("due", [para("tre")])])]


def _big_text_blocks() -> list[dict[str, Any]]:
    items = [{"type": "text", "text": {"content": "x" * 2000}} for _ in range(100)]
    return [{"type": "paragraph", "paragraph": {"rich_text": items}} for _ in range(3)]


REFUSED_APPENDS: dict[str, Any] = {
    "more than 100 children": {"children": [para(f"p{i}") for i in range(101)]},
    "three levels of nesting": {"children": _deep()},
    "more than 1000 block elements": {
        "children": [tog(f"t{i}", [para("x")] * 10) for i in range(91)]
    },
    "text over 2000 characters": {"children": [para("x" * 2001)]},
    "more than 500 KB": {"children": _big_text_blocks()},
    "children outside the type object": {
        "children": [{"type": "toggle", "toggle": {"rich_text": []}, "children": [para("x")]}]
    },
    "a divider with children": {"children": [{"type": "divider", "divider": {"children": []}}]},
    "an unknown block type": {"children": [{"type": "table", "table": {}}]},
    "children that are not a list": {"children": {"a": 1}},
    "no children": {},
    "after a block that is not a child": {
        "children": [para("x")],
        "after": "00000000-0000-4000-8000-000000000000",
    },
    "a rich text without content": {
        "children": [{"type": "paragraph", "paragraph": {"rich_text": [{"type": "text"}]}}]
    },
    "an unknown color": {
        "children": [{"type": "paragraph", "paragraph": {"rich_text": [], "color": "neon"}}]
    },
}


@pytest.mark.parametrize("body", list(REFUSED_APPENDS.values()), ids=list(REFUSED_APPENDS))
async def test_an_append_beyond_the_api_limits_is_refused_whole(
    http: httpx.AsyncClient, store: NotionStore, body: dict[str, Any]
):
    ws = richest_workspace(store)
    page_id = ws["pages"][0]["page_id"]
    page = page_of(store, ws["pages"][0], ws["token"])
    before = len(store.live_children(page))
    answer = await http.patch(
        f"/v1/blocks/{page_id}/children", headers=headers(ws["token"]), content=json.dumps(body)
    )
    assert answer.status_code == 400, answer.text
    assert await error_code(answer) == "validation_error"
    assert len(store.live_children(page)) == before


async def test_a_body_that_is_not_json_is_invalid_json(http: httpx.AsyncClient, store: NotionStore):
    ws = richest_workspace(store)
    answer = await http.patch(
        f"/v1/blocks/{ws['pages'][0]['page_id']}/children",
        headers=headers(ws["token"]),
        content=b"{nope",
    )
    assert answer.status_code == 400
    assert await error_code(answer) == "invalid_json"


async def test_append_after_a_child_inserts_in_place(http: httpx.AsyncClient, store: NotionStore):
    ws = richest_workspace(store)
    page = page_of(store, ws["pages"][0], ws["token"])
    first, second = store.live_children(page)[:2]
    answer = await http.patch(
        f"/v1/blocks/{page.id}/children",
        headers=headers(ws["token"]),
        json={"children": [para("in mezzo")], "after": first.id},
    )
    assert answer.status_code == 200, answer.text
    ids = [b.id for b in store.live_children(page)]
    assert ids[0] == first.id and ids[2] == second.id
    assert plain(store.live_children(page)[1]) == "in mezzo"


# --- updates -------------------------------------------------------------------------------------


async def test_an_update_changes_a_toggle_title_and_moves_the_page_last_edited_time(
    http: httpx.AsyncClient, store: NotionStore, clock: ManualClock
):
    ws = richest_workspace(store)
    page = page_of(store, ws["pages"][0], ws["token"])
    target = next(b for b in store.live_children(page) if b.type == "toggle")
    clock.advance(3600 + 95)
    answer = await http.patch(
        f"/v1/blocks/{target.id}",
        headers=headers(ws["token"]),
        json={"toggle": {"rich_text": text("Titolo nuovo")}},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["toggle"]["rich_text"][0]["plain_text"] == "Titolo nuovo"
    page_json = (await http.get(f"/v1/pages/{page.id}", headers=headers(ws["token"]))).json()
    assert page_json["last_edited_time"] == clock.now().strftime("%Y-%m-%dT%H:%M:00.000Z")


@pytest.mark.parametrize(
    "body",
    [
        {"paragraph": {"rich_text": []}},
        {"toggle": {"rich_text": [], "children": [para("x")]}},
        {"toggle": {"icon": {"type": "emoji", "emoji": "x"}}},
        {"archived": "yes"},
        {"title": "x"},
    ],
    ids=["type change", "children", "unknown field", "archived not boolean", "unknown key"],
)
async def test_an_invalid_update_is_refused(
    http: httpx.AsyncClient, store: NotionStore, body: dict[str, Any]
):
    ws = richest_workspace(store)
    page = page_of(store, ws["pages"][0], ws["token"])
    target = next(b for b in store.live_children(page) if b.type == "toggle")
    answer = await http.patch(f"/v1/blocks/{target.id}", headers=headers(ws["token"]), json=body)
    assert answer.status_code == 400
    assert await error_code(answer) == "validation_error"


async def test_a_deleted_block_leaves_its_parent_and_cannot_be_edited(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    page = page_of(store, ws["pages"][0], ws["token"])
    target = next(b for b in store.live_children(page) if b.type == "toggle")
    deleted = await http.delete(f"/v1/blocks/{target.id}", headers=headers(ws["token"]))
    assert deleted.json()["archived"] is True
    assert target.id not in [b.id for b in store.live_children(page)]
    edit = await http.patch(
        f"/v1/blocks/{target.id}",
        headers=headers(ws["token"]),
        json={"toggle": {"rich_text": text("x")}},
    )
    assert await error_code(edit) == "validation_error"


# --- rate limit, faults, controls ----------------------------------------------------------------


async def test_the_bucket_allows_a_burst_of_10_then_429_with_retry_after_in_whole_seconds(
    http: httpx.AsyncClient, store: NotionStore, clock: ManualClock
):
    mine, other = store.workspaces()[:2]
    url = f"/v1/pages/{mine['pages'][0]['page_id']}"
    answers = [await http.get(url, headers=headers(mine["token"])) for _ in range(11)]
    assert [a.status_code for a in answers[:10]] == [200] * 10
    assert answers[10].status_code == 429
    assert await error_code(answers[10]) == "rate_limited"
    assert answers[10].headers["Retry-After"] == "1"
    # Another integration token has its own bucket.
    other_answer = await http.get(
        f"/v1/pages/{other['pages'][0]['page_id']}", headers=headers(other["token"])
    )
    assert other_answer.status_code == 200
    clock.advance(1)
    again = [await http.get(url, headers=headers(mine["token"])) for _ in range(4)]
    assert [a.status_code for a in again] == [200, 200, 200, 429]
    stats = (await http.get("/_sandbox/stats")).json()
    assert stats["rate_limited"]["by_workspace"] == {mine["workspace_id"]: 2}
    assert stats["requests"]["by_workspace"][mine["workspace_id"]] == 15


async def test_the_rate_limit_control_changes_the_bucket(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    answer = await http.put(
        "/_sandbox/rate-limit",
        json={"requests_per_second": 0.5, "burst": 1, "workspace_id": ws["workspace_id"]},
    )
    assert answer.json() == {"requests_per_second": 0.5, "burst": 1}
    url = f"/v1/pages/{ws['pages'][0]['page_id']}"
    assert (await http.get(url, headers=headers(ws["token"]))).status_code == 200
    refused = await http.get(url, headers=headers(ws["token"]))
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "2"


async def test_faults_fail_named_ids_and_a_share_of_requests(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    await http.put("/_sandbox/rate-limit", json={"requests_per_second": 1000, "burst": 1000})
    broken, fine = ws["pages"][0]["page_id"], ws["pages"][1]["page_id"]
    await http.post("/_sandbox/faults", json={"fail_ids": [broken]})
    failed = await http.get(f"/v1/blocks/{broken}/children", headers=headers(ws["token"]))
    assert failed.status_code == 500
    assert await error_code(failed) == "internal_server_error"
    assert (await http.get(f"/v1/pages/{fine}", headers=headers(ws["token"]))).status_code == 200
    await http.delete("/_sandbox/faults")
    await http.post("/_sandbox/faults", json={"error_rate": 0.5})
    codes = [
        (await http.get(f"/v1/pages/{fine}", headers=headers(ws["token"]))).status_code
        for _ in range(40)
    ]
    assert set(codes) == {200, 503}


async def test_reset_restores_the_seeded_content(http: httpx.AsyncClient, store: NotionStore):
    ws = richest_workspace(store)
    page_id = ws["pages"][0]["page_id"]
    url = f"/v1/blocks/{page_id}/children"
    before = (await http.get(url, headers=headers(ws["token"]))).json()["results"]
    await http.patch(url, headers=headers(ws["token"]), json={"children": [para("nuovo")]})
    assert (await http.post("/_sandbox/reset")).json() == {"ok": True}
    after = (await http.get(url, headers=headers(ws["token"]))).json()["results"]
    assert [b["id"] for b in after] == [b["id"] for b in before]
    assert (await http.get("/_sandbox/stats")).json()["appends"]["requests"] == 0


async def test_the_clock_control_moves_a_manual_clock(http: httpx.AsyncClient, clock: ManualClock):
    start = clock.now()
    answer = await http.post("/_sandbox/clock/advance", json={"seconds": 90})
    assert answer.status_code == 200
    assert (clock.now() - start).total_seconds() == 90


async def test_the_workspaces_control_lists_tokens_databases_and_page_truth(
    http: httpx.AsyncClient, store: NotionStore
):
    workspaces = (await http.get("/_sandbox/workspaces")).json()
    assert workspaces == store.workspaces()
    page = workspaces[0]["pages"][0]
    assert set(page) >= {
        "page_id",
        "title",
        "pms_room_type_id",
        "sections_present",
        "sections_missing",
        "wifi",
        "wifi_title_complete",
    }


# --- the official SDK ----------------------------------------------------------------------------


async def test_the_official_sdk_runs_against_the_emulator_unchanged(store: NotionStore):
    ws = richest_workspace(store)
    # The SDK would really sleep on a 429 (the clock here never moves): keep out of the limit.
    store.set_rate_limit(requests_per_second=1000, burst=1000)
    transport = httpx.ASGITransport(app=create_notion_app(store))
    async with httpx.AsyncClient(transport=transport) as http:
        # The SDK's defaults throughout (Notion-Version 2025-09-03), except where to send.
        sdk = NotionSdk(auth=ws["token"], base_url="http://notes.test", client=http)
        database = await sdk.databases.retrieve(database_id=ws["database_id"])
        source = database["data_sources"][0]["id"]
        rows = await async_collect_paginated_api(
            sdk.data_sources.query, data_source_id=source, page_size=2
        )
        assert [r["id"] for r in rows] == [p["page_id"] for p in ws["pages"]]
        page = await sdk.pages.retrieve(page_id=rows[0]["id"])
        assert page["id"] == rows[0]["id"]
        blocks = await async_collect_paginated_api(
            sdk.blocks.children.list, block_id=page["id"], page_size=7
        )
        assert len(blocks) == len(store.live_children(page_of(store, ws["pages"][0], ws["token"])))
        created = await sdk.blocks.children.append(block_id=page["id"], children=[para("ciao")])
        block_id = created["results"][0]["id"]
        updated = await sdk.blocks.update(block_id=block_id, paragraph={"rich_text": text("hi")})
        assert updated["paragraph"]["rich_text"][0]["plain_text"] == "hi"
        assert (await sdk.blocks.retrieve(block_id=block_id))["id"] == block_id


# --- Notion-Version 2026-03-11 and search validation ---------------------------------------------


async def test_from_2026_03_11_appends_take_position_and_objects_report_only_in_trash(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    page_id = ws["pages"][0]["page_id"]
    sent = headers(ws["token"], "2026-03-11")
    url = f"/v1/blocks/{page_id}/children"
    first = store.live_children(page_of(store, ws["pages"][0], ws["token"]))[0]
    old_style = await http.patch(
        url, headers=sent, json={"children": [para("x")], "after": first.id}
    )
    assert old_style.status_code == 400 and await error_code(old_style) == "validation_error"

    at_start = await http.patch(
        url, headers=sent, json={"children": [para("primo")], "position": {"type": "start"}}
    )
    after_first = await http.patch(
        url,
        headers=sent,
        json={
            "children": [para("secondo")],
            "position": {
                "type": "after_block",
                "after_block": {"id": at_start.json()["results"][0]["id"]},
            },
        },
    )
    assert at_start.status_code == after_first.status_code == 200
    children = store.live_children(page_of(store, ws["pages"][0], ws["token"]))
    assert [plain(b) for b in children[:3]] == ["primo", "secondo", plain(first)]
    created = after_first.json()["results"][0]
    assert created["in_trash"] is False and "archived" not in created

    block_url = f"/v1/blocks/{created['id']}"
    refused = await http.patch(block_url, headers=sent, json={"archived": True})
    assert refused.status_code == 400 and await error_code(refused) == "validation_error"
    trashed = await http.patch(block_url, headers=sent, json={"in_trash": True})
    assert trashed.json()["in_trash"] is True


@pytest.mark.parametrize(
    "body",
    [
        {"filter": {"property": "title", "value": "page"}},
        {"sort": {"timestamp": "created_time", "direction": "ascending"}},
        {"sort": {"timestamp": "last_edited_time", "direction": "up"}},
        {"query": 7},
        {"page_size": 101},
        {"unknown": True},
    ],
    ids=["filter-property", "sort-timestamp", "sort-direction", "query-type", "page-size", "extra"],
)
async def test_a_malformed_search_is_a_validation_error(
    http: httpx.AsyncClient, store: NotionStore, body: dict[str, Any]
):
    ws = richest_workspace(store)
    answer = await http.post("/v1/search", headers=headers(ws["token"], "2025-09-03"), json=body)
    assert answer.status_code == 400
    assert await error_code(answer) == "validation_error"


async def test_search_is_counted_and_rate_limited_like_every_other_request(
    http: httpx.AsyncClient, store: NotionStore
):
    ws = richest_workspace(store)
    store.set_rate_limit(requests_per_second=1, burst=1)
    sent = headers(ws["token"], "2025-09-03")
    assert (await http.post("/v1/search", headers=sent, json={})).status_code == 200
    limited = await http.get("/v1/users/me", headers=sent)
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "1"
    assert store.stats.requests_by_endpoint["POST /v1/search"] == 1
    assert store.stats.requests_by_endpoint["GET /v1/users/me"] == 1
