"""Database queries with filters and sorts, page create and page update on the notes emulator,
each through the official ``notion-client`` at both Notion-Versions pmsgate supports.

At 2022-06-28 a database is queried at ``POST /v1/databases/{id}/query`` (SDK 3.x reaches it
through its generic ``request``) and pages name a ``database_id`` parent; at 2025-09-03 the
database's data source is queried and named. Expected rows are computed from the unfiltered
answer, so the tests hold for any seed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import date
from typing import Any

import pytest
from notion_client import AsyncClient
from notion_client.errors import APIResponseError
from notion_client.helpers import async_collect_paginated_api

from pmsgate.clock import ManualClock
from pmsgate.sandbox.notion.store import NotionStore
from tests.support.notion_sdk import official_sdk, richest_workspace, sdk_store, text

pytestmark = pytest.mark.anyio

LEGACY, DATA_SOURCES = "2022-06-28", "2025-09-03"
VERSIONS = [LEGACY, DATA_SOURCES]
ROOM = "PMS room type id"

Row = dict[str, Any]


@pytest.fixture
def store(clock: ManualClock) -> NotionStore:
    return sdk_store(clock)


@pytest.fixture
def workspace(store: NotionStore) -> dict[str, Any]:
    return richest_workspace(store)


class Notes:
    """The official SDK at one version, and the version's way to query and to name a parent."""

    def __init__(self, sdk: AsyncClient, version: str, workspace: dict[str, Any]) -> None:
        self.sdk = sdk
        self.version = version
        self.workspace = workspace

    async def query_page(self, **body: Any) -> Any:
        body = {k: v for k, v in body.items() if v is not None}
        if self.version == LEGACY:
            path = f"databases/{self.workspace['database_id']}/query"
            return await self.sdk.request(path=path, method="POST", body=body)
        return await self.sdk.data_sources.query(
            data_source_id=self.workspace["data_source_id"], **body
        )

    async def query(self, **body: Any) -> list[Row]:
        rows: list[Row] = await async_collect_paginated_api(self.query_page, **body)
        return rows

    def parent(self) -> dict[str, str]:
        if self.version == LEGACY:
            return {"database_id": self.workspace["database_id"]}
        return {"type": "data_source_id", "data_source_id": self.workspace["data_source_id"]}

    def trash(self, value: bool) -> dict[str, bool]:
        return {"archived": value} if self.version == LEGACY else {"in_trash": value}


@asynccontextmanager
async def notes(
    store: NotionStore, workspace: dict[str, Any], version: str
) -> AsyncIterator[Notes]:
    async with official_sdk(store, workspace["token"], version) as sdk:
        yield Notes(sdk, version, workspace)


def title(row: Row) -> str:
    return "".join(t["plain_text"] for t in row["properties"]["Name"]["title"])


def address(row: Row) -> str:
    return "".join(t["plain_text"] for t in row["properties"]["Address"]["rich_text"])


def status(row: Row) -> str | None:
    option = row["properties"]["Status"]["select"]
    return None if option is None else str(option["name"])


def published(row: Row) -> bool:
    return bool(row["properties"]["Published"]["checkbox"])


def reviewed(row: Row) -> date | None:
    value = row["properties"]["Last reviewed"]["date"]
    return None if value is None else date.fromisoformat(value["start"])


def ids(rows: list[Row]) -> list[str]:
    return [row["id"] for row in rows]


def where(rows: list[Row], keep: Callable[[Row], bool]) -> list[str]:
    return [row["id"] for row in rows if keep(row)]


# --- filters ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_each_property_type_filters_in_its_public_form(
    store: NotionStore, workspace: dict[str, Any], version: str
) -> None:
    async with notes(store, workspace, version) as api:
        every = await api.query()
        word = title(every[0]).split()[0]
        some_day = next(d for d in map(reviewed, every) if d is not None)
        room = every[1]["properties"][ROOM]["number"]
        cases: list[tuple[dict[str, Any], Callable[[Row], bool]]] = [
            (
                {"property": "Name", "title": {"contains": word.lower()}},
                lambda r: word.casefold() in title(r).casefold(),
            ),
            (
                {"property": "Name", "rich_text": {"starts_with": word}},
                lambda r: title(r).casefold().startswith(word.casefold()),
            ),
            ({"property": "Name", "title": {"equals": title(every[0])}}, lambda r: r is every[0]),
            (
                {"property": "Address", "rich_text": {"does_not_contain": "via"}},
                lambda r: "via" not in address(r).casefold(),
            ),
            (
                {"property": "Address", "rich_text": {"is_not_empty": True}},
                lambda r: bool(address(r)),
            ),
            ({"property": "Listing id", "rich_text": {"is_empty": True}}, lambda r: True),
            ({"property": ROOM, "number": {"equals": room}}, lambda r: r is every[1]),
            (
                {"property": "pmsR", "number": {"greater_than": room}},
                lambda r: r["properties"][ROOM]["number"] > room,
            ),
            ({"property": "Status", "select": {"equals": "Draft"}}, lambda r: status(r) == "Draft"),
            (
                {"property": "Status", "select": {"does_not_equal": "Ready"}},
                lambda r: status(r) != "Ready",
            ),
            ({"property": "Published", "checkbox": {"equals": True}}, published),
            (
                {"property": "Published", "checkbox": {"does_not_equal": True}},
                lambda r: not published(r),
            ),
            (
                {"property": "Last reviewed", "date": {"on_or_after": some_day.isoformat()}},
                lambda r: (d := reviewed(r)) is not None and d >= some_day,
            ),
            (
                {"property": "Last reviewed", "date": {"before": some_day.isoformat()}},
                lambda r: (d := reviewed(r)) is not None and d < some_day,
            ),
            (
                {"property": "Last reviewed", "date": {"is_empty": True}},
                lambda r: reviewed(r) is None,
            ),
        ]
        for condition, keep in cases:
            found = await api.query(filter=condition)
            assert ids(found) == where(every, keep), condition
    # the seed gives every case something to find and something to leave out
    assert 0 < len(where(every, published)) < len(every)
    assert 0 < len(where(every, lambda r: reviewed(r) is None)) < len(every)


@pytest.mark.parametrize("version", VERSIONS)
async def test_compound_filters_combine_and_or_two_levels_deep(
    store: NotionStore, workspace: dict[str, Any], version: str
) -> None:
    draft_or_review = {
        "or": [
            {"property": "Status", "select": {"equals": "Draft"}},
            {"property": "Status", "select": {"equals": "Needs review"}},
        ]
    }
    async with notes(store, workspace, version) as api:
        every = await api.query()
        found = await api.query(
            filter={
                "and": [{"property": "Published", "checkbox": {"equals": True}}, draft_or_review]
            }
        )
        either = await api.query(filter=draft_or_review)
    assert ids(found) == where(
        every, lambda r: published(r) and status(r) in ("Draft", "Needs review")
    )
    assert ids(either) == where(every, lambda r: status(r) != "Ready")
    assert found and len(found) < len(either)


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_timestamp_filter_and_pagination_keep_to_the_filter(
    store: NotionStore, workspace: dict[str, Any], version: str, clock: ManualClock
) -> None:
    async with notes(store, workspace, version) as api:
        every = await api.query()
        clock.advance(3600)
        await api.sdk.pages.update(
            page_id=every[2]["id"], properties={"Published": {"checkbox": True}}
        )
        since = clock.now().strftime("%Y-%m-%dT%H:%M:00Z")
        edited = await api.query(
            filter={"timestamp": "last_edited_time", "last_edited_time": {"on_or_after": since}}
        )
        drafts = await api.query(
            filter={"property": "Status", "select": {"equals": "Draft"}}, page_size=1
        )
    assert ids(edited) == [every[2]["id"]]
    assert ids(drafts) == where(every, lambda r: status(r) == "Draft")
    assert len(drafts) > 1  # collected across result pages of one row


# --- sorts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_sorts_order_by_properties_and_timestamps_with_empty_values_last(
    store: NotionStore, workspace: dict[str, Any], version: str
) -> None:
    async with notes(store, workspace, version) as api:
        every = await api.query()
        by_room = await api.query(sorts=[{"property": ROOM, "direction": "descending"}])
        by_title = await api.query(sorts=[{"property": "Name", "direction": "ascending"}])
        by_review = await api.query(
            sorts=[{"property": "Last reviewed", "direction": "descending"}]
        )
        by_status_then_room = await api.query(
            sorts=[
                {"property": "Status", "direction": "ascending"},
                {"property": ROOM, "direction": "ascending"},
            ]
        )
        by_creation = await api.query(
            sorts=[{"timestamp": "created_time", "direction": "ascending"}]
        )
    rooms = [r["properties"][ROOM]["number"] for r in by_room]
    assert rooms == sorted(rooms, reverse=True) and len(by_room) == len(every)
    assert [title(r).casefold() for r in by_title] == sorted(title(r).casefold() for r in every)
    days = [reviewed(r) for r in by_review]
    dated = [d for d in days if d is not None]
    assert days == [*sorted(dated, reverse=True), *[None] * (len(days) - len(dated))]
    order = ["Ready", "Draft", "Needs review"]  # the option order of the schema
    keys = [
        (order.index(status(r) or ""), r["properties"][ROOM]["number"]) for r in by_status_then_room
    ]
    assert keys == sorted(keys)
    created = [r["created_time"] for r in by_creation]
    assert created == sorted(created)


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "body",
    [
        {"filter": {"property": "Colour", "select": {"equals": "red"}}},
        {"filter": {"property": "Status", "checkbox": {"equals": True}}},
        {"filter": {"property": ROOM, "number": {"equals": "3"}}},
        {
            "filter": {
                "property": "Published",
                "checkbox": {"equals": True, "does_not_equal": False},
            }
        },
        {"filter": {"property": "Last reviewed", "date": {"after": "next tuesday"}}},
        {"filter": {"property": "Address", "rich_text": {"is_empty": False}}},
        {
            "filter": {
                "and": [
                    {"or": [{"and": [{"property": "Published", "checkbox": {"equals": True}}]}]}
                ]
            }
        },
        {"filter": {"and": {"property": "Published", "checkbox": {"equals": True}}}},
        {"filter": {"timestamp": "archived_time", "archived_time": {"after": "2026-01-01"}}},
        {"sorts": [{"property": ROOM, "direction": "up"}]},
        {"sorts": [{"property": "Colour", "direction": "ascending"}]},
        {"sorts": {"property": ROOM, "direction": "ascending"}},
    ],
    ids=[
        "unknown-property",
        "wrong-type",
        "number-as-text",
        "two-operators",
        "bad-date",
        "is-empty-false",
        "three-levels",
        "and-not-array",
        "unknown-timestamp",
        "sort-direction",
        "sort-unknown-property",
        "sorts-not-array",
    ],
)
async def test_a_malformed_filter_or_sort_is_a_validation_error_in_the_notion_shape(
    store: NotionStore, workspace: dict[str, Any], version: str, body: dict[str, Any]
) -> None:
    async with notes(store, workspace, version) as api:
        with pytest.raises(APIResponseError) as caught:
            await api.query_page(**body)
    assert (caught.value.status, caught.value.code) == (400, "validation_error")
    error = json.loads(caught.value.body)
    assert error["object"] == "error" and error["status"] == 400
    assert error["code"] == "validation_error" and error["message"]


# --- pages: create and update -------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_created_page_has_its_properties_and_blocks_and_is_queried(
    store: NotionStore, workspace: dict[str, Any], version: str
) -> None:
    async with notes(store, workspace, version) as api:
        before = await api.query()
        created = await api.sdk.pages.create(
            parent=api.parent(),
            properties={
                "Name": {"title": text("Attico sul porto")},
                ROOM: {"number": 987654},
                "Address": {"rich_text": text("Molo 1, Genova")},
                "Listing id": {"rich_text": text("L-42")},
                "Status": {"select": {"name": "Seasonal"}},
                "Published": {"checkbox": True},
                "Last reviewed": {"date": {"start": "2026-11-20"}},
            },
            children=[
                {"type": "heading_2", "heading_2": {"rich_text": text("WiFi")}},
                {"type": "paragraph", "paragraph": {"rich_text": text("Rete: Porto")}},
            ],
        )
        read = await api.sdk.pages.retrieve(page_id=created["id"])
        blocks = await async_collect_paginated_api(
            api.sdk.blocks.children.list, block_id=created["id"]
        )
        found = await api.query(filter={"property": ROOM, "number": {"equals": 987654}})
        seasonal = await api.query(filter={"property": "Status", "select": {"equals": "Seasonal"}})
        after = await api.query()
    assert created["object"] == "page" and read == {**created, "request_id": read["request_id"]}
    properties = read["properties"]
    assert title(read) == "Attico sul porto" and address(read) == "Molo 1, Genova"
    assert properties[ROOM] == {"id": "pmsR", "type": "number", "number": 987654}
    assert status(read) == "Seasonal" and published(read) and reviewed(read) == date(2026, 11, 20)
    parent_type = "database_id" if version == LEGACY else "data_source_id"
    assert read["parent"]["type"] == parent_type
    assert [b["type"] for b in blocks] == ["heading_2", "paragraph"]
    assert ids(found) == ids(seasonal) == [created["id"]]
    assert ids(after) == [*ids(before), created["id"]]
    assert store.stats.pages_created == 1


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_page_without_properties_starts_empty_and_a_new_option_joins_the_schema(
    store: NotionStore, workspace: dict[str, Any], version: str
) -> None:
    async with notes(store, workspace, version) as api:
        bare = await api.sdk.pages.create(parent=api.parent(), properties={})
        await api.sdk.pages.create(
            parent=api.parent(), properties={"Status": {"select": {"name": "Winter"}}}
        )
        if version == LEGACY:
            schema = await api.sdk.databases.retrieve(database_id=workspace["database_id"])
        else:
            schema = await api.sdk.data_sources.retrieve(data_source_id=workspace["data_source_id"])
    values = {name: prop[prop["type"]] for name, prop in bare["properties"].items()}
    assert values == {
        "Name": [],
        ROOM: None,
        "Address": [],
        "Listing id": [],
        "Status": None,
        "Published": False,
        "Last reviewed": None,
    }
    options = [o["name"] for o in schema["properties"]["Status"]["select"]["options"]]
    assert options == ["Ready", "Draft", "Needs review", "Winter"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_page_update_changes_properties_and_the_trash_hides_it(
    store: NotionStore, workspace: dict[str, Any], version: str, clock: ManualClock
) -> None:
    page_id = workspace["pages"][0]["page_id"]
    async with notes(store, workspace, version) as api:
        clock.advance(120)
        updated = await api.sdk.pages.update(
            page_id=page_id,
            properties={
                "Name": {"title": text("Bilocale rinnovato")},
                "Status": {"select": None},
                "Published": {"checkbox": False},
                "Last reviewed": {"date": None},
            },
        )
        trashed = await api.sdk.pages.update(page_id=page_id, **api.trash(True))
        listed = await api.query()
        with pytest.raises(APIResponseError) as refused:
            await api.sdk.pages.update(
                page_id=page_id, properties={"Published": {"checkbox": True}}
            )
        restored = await api.sdk.pages.update(page_id=page_id, **api.trash(False))
        back = await api.query(
            filter={"property": "Name", "title": {"equals": "Bilocale rinnovato"}}
        )
    assert title(updated) == "Bilocale rinnovato"
    assert status(updated) is None and not published(updated) and reviewed(updated) is None
    assert updated["last_edited_time"] == clock.now().strftime("%Y-%m-%dT%H:%M:00.000Z")
    assert trashed["in_trash"] is True and page_id not in ids(listed)
    assert (refused.value.status, refused.value.code) == (400, "validation_error")
    assert restored["in_trash"] is False and ids(back) == [page_id]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("request_body", "code"),
    [
        ({"properties": {"Colour": {"select": {"name": "red"}}}}, "validation_error"),
        ({"properties": {"Published": {"checkbox": "yes"}}}, "validation_error"),
        ({"properties": {ROOM: {"rich_text": text("12")}}}, "validation_error"),
        ({"properties": {"Last reviewed": {"date": {"start": "someday"}}}}, "validation_error"),
        ({"properties": {"Status": {"select": {"name": "a,b"}}}}, "validation_error"),
    ],
    ids=["unknown-property", "checkbox-as-text", "wrong-type", "bad-date", "comma-in-option"],
)
async def test_a_malformed_page_write_is_refused_and_changes_nothing(
    store: NotionStore,
    workspace: dict[str, Any],
    version: str,
    request_body: dict[str, Any],
    code: str,
) -> None:
    page_id = workspace["pages"][0]["page_id"]
    async with notes(store, workspace, version) as api:
        before = await api.sdk.pages.retrieve(page_id=page_id)
        with pytest.raises(APIResponseError) as on_create:
            await api.sdk.pages.create(parent=api.parent(), **request_body)
        with pytest.raises(APIResponseError) as on_update:
            await api.sdk.pages.update(page_id=page_id, **request_body)
        after = await api.sdk.pages.retrieve(page_id=page_id)
    assert (on_create.value.status, on_create.value.code) == (400, code)
    assert (on_update.value.status, on_update.value.code) == (400, code)
    assert before["properties"] == after["properties"]
    assert store.stats.pages_created == 0


async def test_at_2022_06_28_a_page_cannot_name_a_data_source_parent(
    store: NotionStore, workspace: dict[str, Any]
) -> None:
    async with notes(store, workspace, LEGACY) as api:
        with pytest.raises(APIResponseError) as caught:
            await api.sdk.pages.create(
                parent={"data_source_id": workspace["data_source_id"]}, properties={}
            )
    assert (caught.value.status, caught.value.code) == (400, "validation_error")


async def test_from_2025_09_03_a_page_may_still_name_its_single_source_database(
    store: NotionStore, workspace: dict[str, Any]
) -> None:
    async with notes(store, workspace, DATA_SOURCES) as api:
        created = await api.sdk.pages.create(
            parent={"database_id": workspace["database_id"]},
            properties={"Name": {"title": text("Monolocale")}},
        )
    assert created["parent"]["data_source_id"] == workspace["data_source_id"]


async def test_a_page_in_another_workspace_is_not_found(
    store: NotionStore, workspace: dict[str, Any]
) -> None:
    other = next(w for w in store.workspaces() if w["workspace_id"] != workspace["workspace_id"])
    async with notes(store, workspace, DATA_SOURCES) as api:
        with pytest.raises(APIResponseError) as caught:
            await api.sdk.pages.update(
                page_id=other["pages"][0]["page_id"], properties={"Published": {"checkbox": True}}
            )
        with pytest.raises(APIResponseError) as parent:
            await api.sdk.pages.create(
                parent={"data_source_id": other["data_source_id"]}, properties={}
            )
    assert (caught.value.status, caught.value.code) == (404, "object_not_found")
    assert (parent.value.status, parent.value.code) == (404, "object_not_found")
