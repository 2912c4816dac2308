"""The official ``notion-client`` SDK runs unchanged against the notes emulator, at every version.

No pmsgate wrapper here: ``notion_client.AsyncClient`` over an ``httpx.ASGITransport``,
only ``base_url``, ``notion_version`` and the httpx client chosen by the test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from notion_client.errors import APIResponseError, HTTPResponseError
from notion_client.helpers import async_collect_paginated_api

from pmsgate.clock import ManualClock
from pmsgate.sandbox.notion.store import NotionStore
from tests.support.notion_sdk import official_sdk, richest_workspace, sdk_store, text

pytestmark = pytest.mark.anyio

LEGACY, DATA_SOURCES, POSITION = "2022-06-28", "2025-09-03", "2026-03-11"
VERSIONS = [LEGACY, DATA_SOURCES, POSITION]

Sdk = Callable[..., Any]


@pytest.fixture
def store(clock: ManualClock) -> NotionStore:
    return sdk_store(clock)


@pytest.fixture
def workspace(store: NotionStore) -> dict[str, Any]:
    return richest_workspace(store)


# --- search --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_search_finds_pages_and_the_database_in_the_versions_shape(
    store: NotionStore, workspace: dict[str, Any], version: str
):
    async with official_sdk(store, workspace["token"], version) as sdk:
        found = await sdk.search()
    container = "database" if version == LEGACY else "data_source"
    assert found["object"] == "list"
    assert found["type"] == f"page_or_{container}"
    assert found["has_more"] is False and found["next_cursor"] is None
    kinds = [r["object"] for r in found["results"]]
    assert sorted(kinds) == sorted(["page"] * len(workspace["pages"]) + [container])
    source = next(r for r in found["results"] if r["object"] == container)
    expected_id = workspace["database_id"] if version == LEGACY else workspace["data_source_id"]
    assert source["id"] == expected_id
    assert source["title"][0]["plain_text"] == "Apartments"
    if version != LEGACY:
        assert source["parent"] == {"type": "database_id", "database_id": workspace["database_id"]}
        assert "Name" in source["properties"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_search_filters_by_object_matches_titles_and_sorts_by_last_edit(
    store: NotionStore, workspace: dict[str, Any], version: str
):
    title = workspace["pages"][1]["title"]
    container = "database" if version == LEGACY else "data_source"
    async with official_sdk(store, workspace["token"], version) as sdk:
        pages = await sdk.search(filter={"property": "object", "value": "page"})
        sources = await sdk.search(filter={"property": "object", "value": container})
        by_title = await sdk.search(query=title.upper())
        oldest_first = await sdk.search(
            filter={"property": "object", "value": "page"},
            sort={"direction": "ascending", "timestamp": "last_edited_time"},
        )
    assert {r["object"] for r in pages["results"]} == {"page"}
    assert len(pages["results"]) == len(workspace["pages"])
    assert [r["object"] for r in sources["results"]] == [container]
    assert workspace["pages"][1]["page_id"] in [r["id"] for r in by_title["results"]]
    assert all(title.casefold() in _title(r).casefold() for r in by_title["results"])
    times = [r["last_edited_time"] for r in oldest_first["results"]]
    assert times == sorted(times)
    newest_first = [r["last_edited_time"] for r in pages["results"]]
    assert newest_first == sorted(newest_first, reverse=True)


@pytest.mark.parametrize(
    ("version", "value"), [(LEGACY, "data_source"), (DATA_SOURCES, "database"), (POSITION, "x")]
)
async def test_search_refuses_an_object_filter_the_version_does_not_know(
    store: NotionStore, workspace: dict[str, Any], version: str, value: str
):
    async with official_sdk(store, workspace["token"], version) as sdk:
        with pytest.raises(APIResponseError) as caught:
            await sdk.search(filter={"property": "object", "value": value})
    assert (caught.value.status, caught.value.code) == (400, "validation_error")


@pytest.mark.parametrize("version", VERSIONS)
async def test_search_results_are_collected_across_result_pages(
    store: NotionStore, workspace: dict[str, Any], version: str
):
    async with official_sdk(store, workspace["token"], version) as sdk:
        whole = await sdk.search()
        collected = await async_collect_paginated_api(sdk.search, page_size=2)
    assert [r["id"] for r in collected] == [r["id"] for r in whole["results"]]
    assert len(collected) > 2


def _title(result: dict[str, Any]) -> str:
    if result["object"] == "page":
        return str(result["properties"]["Name"]["title"][0]["plain_text"])
    return str(result["title"][0]["plain_text"])


# --- users ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_users_me_is_the_integrations_bot_owned_by_the_workspace(
    store: NotionStore, workspace: dict[str, Any], version: str
):
    async with official_sdk(store, workspace["token"], version) as sdk:
        me = await sdk.users.me()
    assert me["object"] == "user" and me["type"] == "bot"
    assert me["id"] == workspace["bot_id"]
    assert me["bot"] == {
        "owner": {"type": "workspace", "workspace": True},
        "workspace_name": workspace["name"],
    }
    assert isinstance(me["name"], str) and "avatar_url" in me


@pytest.mark.parametrize("version", VERSIONS)
async def test_users_are_listed_across_pages_and_retrieved_one_by_one(
    store: NotionStore, workspace: dict[str, Any], version: str
):
    async with official_sdk(store, workspace["token"], version) as sdk:
        first = await sdk.users.list(page_size=1)
        users = await async_collect_paginated_api(sdk.users.list, page_size=1)
        person = next(u for u in users if u["type"] == "person")
        one = await sdk.users.retrieve(user_id=person["id"])
        with pytest.raises(APIResponseError) as missing:
            await sdk.users.retrieve(user_id="00000000-0000-4000-8000-000000000000")
    assert (first["object"], first["type"], first["has_more"]) == ("list", "user", True)
    assert workspace["bot_id"] in [u["id"] for u in users]
    assert len({u["id"] for u in users}) == len(users) >= 2
    assert {k: v for k, v in one.items() if k != "request_id"} == person
    assert one["person"]["email"].endswith("@example.invalid")
    assert (missing.value.status, missing.value.code) == (404, "object_not_found")


async def test_a_token_sees_only_its_own_workspaces_users(store: NotionStore):
    mine, other = store.workspaces()[:2]
    async with official_sdk(store, mine["token"], DATA_SOURCES) as sdk:
        with pytest.raises(APIResponseError) as caught:
            await sdk.users.retrieve(user_id=other["bot_id"])
    assert caught.value.code == "object_not_found"


# --- pages, blocks, databases, data sources -----------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_pages_and_blocks_are_read_and_written_unchanged(
    store: NotionStore, workspace: dict[str, Any], version: str
):
    page_id = workspace["pages"][0]["page_id"]
    async with official_sdk(store, workspace["token"], version) as sdk:
        page = await sdk.pages.retrieve(page_id=page_id)
        children = await async_collect_paginated_api(
            sdk.blocks.children.list, block_id=page_id, page_size=7
        )
        first = children[0]["id"]
        placement: dict[str, Any] = (
            {"position": {"type": "after_block", "after_block": {"id": first}}}
            if version == POSITION
            else {"after": first}
        )
        appended = await sdk.blocks.children.append(
            block_id=page_id,
            children=[{"type": "paragraph", "paragraph": {"rich_text": text("ciao")}}],
            **placement,
        )
        new_id = appended["results"][0]["id"]
        after = await async_collect_paginated_api(sdk.blocks.children.list, block_id=page_id)
        updated = await sdk.blocks.update(block_id=new_id, paragraph={"rich_text": text("hi")})
        deleted = await sdk.blocks.delete(block_id=new_id)
    assert page["object"] == "page" and page["id"] == page_id
    parent = page["parent"]["type"]
    assert parent == ("database_id" if version == LEGACY else "data_source_id")
    assert len(children) > 7
    assert appended["object"] == "list" and appended["type"] == "block"
    assert [b["id"] for b in after][:2] == [first, new_id]
    assert updated["paragraph"]["rich_text"][0]["plain_text"] == "hi"
    assert deleted["in_trash"] is True
    # 2026-03-11 reports only in_trash; earlier versions both.
    assert ("archived" in deleted) is (version != POSITION)


@pytest.mark.parametrize("version", [DATA_SOURCES, POSITION])
async def test_from_2025_09_03_a_database_lists_its_data_source_which_is_queried(
    store: NotionStore, workspace: dict[str, Any], version: str
):
    async with official_sdk(store, workspace["token"], version) as sdk:
        database = await sdk.databases.retrieve(database_id=workspace["database_id"])
        source_id = database["data_sources"][0]["id"]
        source = await sdk.data_sources.retrieve(data_source_id=source_id)
        rows = await async_collect_paginated_api(
            sdk.data_sources.query, data_source_id=source_id, page_size=2
        )
        first = await sdk.data_sources.query(data_source_id=source_id, page_size=2)
        with pytest.raises(APIResponseError) as moved:
            await sdk.request(path=f"databases/{workspace['database_id']}/query", method="POST")
    assert "properties" not in database
    assert (source["object"], source["id"]) == ("data_source", workspace["data_source_id"])
    assert [r["id"] for r in rows] == [p["page_id"] for p in workspace["pages"]]
    assert first["type"] == "page_or_data_source" and first["has_more"] is True
    assert (moved.value.status, moved.value.code) == (400, "invalid_request_url")


async def test_at_2022_06_28_a_database_has_its_properties_and_its_own_query(
    store: NotionStore, workspace: dict[str, Any]
):
    async with official_sdk(store, workspace["token"], LEGACY) as sdk:
        database = await sdk.databases.retrieve(database_id=workspace["database_id"])

        async def query(**kwargs: Any) -> Any:
            body = {k: v for k, v in kwargs.items() if v is not None}
            path = f"databases/{workspace['database_id']}/query"
            return await sdk.request(path=path, method="POST", body=body)

        rows = await async_collect_paginated_api(query, page_size=2)
        with pytest.raises(APIResponseError) as unknown:
            await sdk.data_sources.query(data_source_id=workspace["data_source_id"])
    assert "data_sources" not in database and "Name" in database["properties"]
    assert [r["id"] for r in rows] == [p["page_id"] for p in workspace["pages"]]
    assert (unknown.value.status, unknown.value.code) == (400, "invalid_request_url")


# --- versions and endpoints not served -----------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "code"), [("", "missing_version"), ("2024-01-01", "validation_error")]
)
async def test_a_missing_or_unknown_notion_version_is_refused(
    store: NotionStore, workspace: dict[str, Any], version: str, code: str
):
    async with official_sdk(store, workspace["token"], version) as sdk:
        # missing_version is not in the SDK's code enum: it raises its generic HTTP error.
        with pytest.raises(HTTPResponseError) as caught:
            await sdk.users.me()
    body = json.loads(caught.value.body)
    assert caught.value.status == body["status"] == 400
    assert (body["object"], body["code"]) == ("error", code)
    assert body["message"].startswith("Notion-Version header failed validation")
    assert body["request_id"]


async def test_an_sdk_endpoint_the_emulator_does_not_serve_says_so(
    store: NotionStore, workspace: dict[str, Any]
):
    async with official_sdk(store, workspace["token"], DATA_SOURCES) as sdk:
        with pytest.raises(APIResponseError) as caught:
            await sdk.comments.list(block_id=workspace["pages"][0]["page_id"])
    assert (caught.value.status, caught.value.code) == (400, "invalid_request")
    assert "GET /v1/comments" in str(caught.value)
