"""The notes client reads and writes the emulator through the official SDK, within API limits."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx
import pytest
import structlog
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.integrations.kit import ErrorKind, UpstreamError
from pmsgate.integrations.notion.builders import (
    bulleted_list_item,
    callout,
    divider,
    paragraph,
    rich_text,
    toggle,
)
from pmsgate.integrations.notion.client import DEFAULT_NOTION_VERSION, NotionClient
from pmsgate.integrations.notion.errors import (
    ERROR_TABLE,
    NotionInvalidRequest,
    NotionNotFound,
    NotionRateLimited,
    NotionUnauthorized,
    NotionUnavailable,
)
from pmsgate.integrations.notion.models import Block
from pmsgate.integrations.notion.throttle import NotionThrottle
from pmsgate.sandbox.notion.app import create_notion_app
from pmsgate.sandbox.notion.store import Block as StoredBlock
from pmsgate.sandbox.notion.store import NotionStore
from pmsgate.sandbox.notion.store import Page as StoredPage
from tests.support.clocks import RecordingSleep

pytestmark = pytest.mark.anyio

BASE_URL = "http://notes.test"


MakeClient = Callable[..., NotionClient]


@pytest.fixture
def store(clock: ManualClock) -> NotionStore:
    return NotionStore(seed=3, clock=clock)


@pytest.fixture
def sleeper(clock: ManualClock) -> RecordingSleep:
    return RecordingSleep(clock)


@pytest.fixture
def workspace(store: NotionStore) -> dict[str, Any]:
    return max(store.workspaces(), key=lambda w: len(w["pages"]))


@pytest.fixture
async def make_client(
    store: NotionStore, clock: ManualClock, sleeper: RecordingSleep, workspace: dict[str, Any]
) -> AsyncIterator[MakeClient]:
    """Builds clients on the emulator; each gets its own httpx client (the SDK takes it over)."""
    app = create_notion_app(store)
    async with AsyncExitStack() as stack:

        def build(**options: Any) -> NotionClient:
            http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
            stack.push_async_callback(http.aclose)
            options.setdefault("token", SecretStr(workspace["token"]))
            return NotionClient(http, base_url=BASE_URL, clock=clock, sleep=sleeper, **options)

        yield build


@pytest.fixture
async def raw_http(store: NotionStore) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_notion_app(store))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        yield http


def stored_page(store: NotionStore, workspace: dict[str, Any], page_id: str) -> StoredPage:
    return store.page(store.authenticate(workspace["token"]), page_id)


def stored_tree(
    store: NotionStore, node: StoredPage | StoredBlock, depth: int = 1
) -> Iterator[Any]:
    for child in store.live_children(node):
        text = "".join(i["plain_text"] for i in child.content.get("rich_text", []))
        yield (child.id, depth, child.type, text)
        yield from stored_tree(store, child, depth + 1)


def read_tree_rows(blocks: list[Block], depth: int = 1) -> Iterator[Any]:
    for block in blocks:
        yield (block.id, depth, block.type, block.plain_text)
        yield from read_tree_rows(block.children, depth + 1)


def request_shape(block: Mapping[str, Any]) -> tuple[str, str, list[Any]]:
    kind = block["type"]
    content = block[kind]
    text = "".join(item["text"]["content"] for item in content.get("rich_text", []))
    return (kind, text, [request_shape(child) for child in content.get("children", [])])


def read_shape(block: Block) -> tuple[str, str, list[Any]]:
    return (block.type, block.plain_text, [read_shape(child) for child in block.children])


def page_with(workspaces: list[dict[str, Any]], **wanted: Any) -> tuple[dict[str, Any], str]:
    for ws in workspaces:
        for page in ws["pages"]:
            if all(page[key] == value for key, value in wanted.items()):
                return ws, page["page_id"]
    raise AssertionError(f"no seeded page with {wanted}")


# --- reads ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2022-06-28", "2025-09-03"])
async def test_the_apartments_database_is_read_whole_across_result_pages(
    make_client: MakeClient, store: NotionStore, workspace: dict[str, Any], version: str
):
    client = make_client(notion_version=version, page_size=2)
    pages = await client.query_database(workspace["database_id"])
    truth = workspace["pages"]
    assert [p.id for p in pages] == [t["page_id"] for t in truth]
    assert [p.title for p in pages] == [t["title"] for t in truth]
    assert [p.room_type_id for p in pages] == [t["pms_room_type_id"] for t in truth]
    endpoints = store.stats.requests_by_endpoint
    queries = (
        endpoints["POST /v1/databases/{database_id}/query"]
        + endpoints["POST /v1/data_sources/{data_source_id}/query"]
    )
    assert queries == math.ceil(len(truth) / 2) > 1


async def test_a_page_read_gives_its_title_and_room_type(
    make_client: MakeClient, workspace: dict[str, Any]
):
    truth = workspace["pages"][0]
    page = await make_client().get_page(truth["page_id"])
    assert (page.title, page.room_type_id) == (truth["title"], truth["pms_room_type_id"])
    assert page.last_edited_time is not None


async def test_the_whole_tree_is_read_through_nested_toggles_and_long_children_lists(
    make_client: MakeClient, store: NotionStore
):
    ws, page_id = page_with(store.workspaces(), long_toggle=True)
    client = make_client(token=SecretStr(ws["token"]))
    tree = await client.read_tree(page_id)
    rows = list(read_tree_rows(tree))
    assert rows == list(stored_tree(store, stored_page(store, ws, page_id)))
    assert max(len(b.children) for b in tree) > 100
    assert max(depth for _, depth, _, _ in rows) >= 2


async def test_block_models_give_plain_text_and_keep_other_types_raw(
    make_client: MakeClient, workspace: dict[str, Any]
):
    client = make_client()
    page_id = workspace["pages"][0]["page_id"]
    quote = {"type": "quote", "quote": {"rich_text": rich_text("Citazione")}}
    created = await client.append_blocks(page_id, [quote, divider(), callout("Nota", emoji="🔑")])
    assert [b.type for b in created] == ["quote", "divider", "callout"]
    assert [b.known for b in created] == [False, True, True]
    assert [b.plain_text for b in created] == ["Citazione", "", "Nota"]
    assert created[0].raw["quote"]["rich_text"][0]["plain_text"] == "Citazione"
    assert created[2].icon == {"type": "emoji", "emoji": "🔑"}
    as_block = await client.get_block(page_id)
    assert (as_block.type, as_block.plain_text) == ("child_page", workspace["pages"][0]["title"])


# --- appends and updates -------------------------------------------------------------------------


def _blocks_250() -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for i in range(250):
        if i % 25 == 0:
            level_3 = toggle(f"Livello 3 {i}", [bulleted_list_item("c"), paragraph("c2")])
            level_2 = toggle(f"Livello 2 {i}", [paragraph("b"), level_3, paragraph("b2")])
            blocks.append(toggle(f"Sezione {i}", [paragraph("a"), level_2, paragraph("d")]))
        elif i == 7:
            blocks.append(toggle("Lunga", [bulleted_list_item(f"voce {n}") for n in range(150)]))
        else:
            blocks.append(paragraph(f"Paragrafo {i}"))
    return blocks


def _elements(blocks: list[dict[str, Any]]) -> int:
    return sum(1 + _elements(b[b["type"]].get("children", [])) for b in blocks)


async def test_an_append_of_250_blocks_with_deep_children_is_split_within_the_api_limits(
    make_client: MakeClient,
    store: NotionStore,
    workspace: dict[str, Any],
    raw_http: httpx.AsyncClient,
):
    page_id = workspace["pages"][0]["page_id"]
    blocks = _blocks_250()
    # The emulator refuses the whole payload in one request, as the API does.
    refused = await raw_http.patch(
        f"/v1/blocks/{page_id}/children",
        headers={"Authorization": f"Bearer {workspace['token']}", "Notion-Version": "2022-06-28"},
        json={"children": blocks},
    )
    assert refused.status_code == 400
    assert refused.json()["code"] == "validation_error"

    client = make_client()
    created = await client.append_blocks(page_id, blocks)

    assert len(created) == 250
    appends = store.stats.as_dict()["appends"]
    assert appends["requests"] >= 3 + 10 + 1  # three chunks, deeper levels, the long tail
    assert appends["max_children"] <= 100
    assert appends["max_depth"] <= 2
    assert appends["max_elements"] <= 1000
    assert store.stats.blocks_created == _elements(blocks)
    tree = await client.read_tree(page_id)
    assert [read_shape(b) for b in tree[-250:]] == [request_shape(b) for b in blocks]
    assert [b.id for b in tree[-250:]] == [b.id for b in created]


async def test_an_append_after_a_block_keeps_the_order_across_requests(
    make_client: MakeClient, workspace: dict[str, Any]
):
    client = make_client()
    page_id = workspace["pages"][0]["page_id"]
    before = await client.list_children(page_id)
    created = await client.append_blocks(
        page_id, [paragraph(f"inserito {i}") for i in range(150)], after=before[0].id
    )
    after = await client.list_children(page_id)
    assert [b.id for b in after] == [
        before[0].id,
        *[b.id for b in created],
        *[b.id for b in before[1:]],
    ]


async def test_texts_longer_than_2000_characters_are_split_into_several_items(
    make_client: MakeClient, workspace: dict[str, Any]
):
    client = make_client()
    text = "".join(f"{i % 10}" for i in range(4500))
    created = await client.append_blocks(workspace["pages"][0]["page_id"], [paragraph(text)])
    stored = await client.get_block(created[0].id)
    assert len(stored.rich_text) == 3
    assert stored.plain_text == text


async def test_a_toggle_title_and_a_callout_text_are_updated_in_place(
    make_client: MakeClient, store: NotionStore
):
    ws, page_id = page_with(store.workspaces(), wifi_callout_words=True)
    truth = next(p for p in ws["pages"] if p["page_id"] == page_id)
    client = make_client(token=SecretStr(ws["token"]))
    tree = await client.read_tree(page_id)
    wifi = next(b for b in tree if b.plain_text == truth["section_titles"]["wifi"])
    network, password = truth["wifi"]["network"], truth["wifi"]["password"]

    renamed = await client.set_text(wifi, f"WiFi - rete {network} · password {password}")
    note = next(b for b in wifi.descendants() if b.type == "callout")
    reworded = await client.update_block(
        note.id, "callout", {"rich_text": rich_text("Se la connessione cade, riavvia il router.")}
    )

    assert renamed.plain_text == f"WiFi - rete {network} · password {password}"
    assert (await client.get_block(wifi.id)).plain_text == renamed.plain_text
    assert reworded.plain_text == "Se la connessione cade, riavvia il router."
    assert reworded.icon == note.icon
    assert store.stats.blocks_updated == 2


async def test_a_deleted_block_is_gone_from_the_tree(
    make_client: MakeClient, workspace: dict[str, Any]
):
    client = make_client()
    page_id = workspace["pages"][0]["page_id"]
    first = (await client.list_children(page_id))[0]
    deleted = await client.delete_block(first.id)
    assert deleted.archived is True
    assert first.id not in [b.id for b in await client.list_children(page_id)]


# --- throttle and 429 ----------------------------------------------------------------------------


async def test_the_throttle_spaces_requests_at_the_configured_rate(
    clock: ManualClock, sleeper: RecordingSleep
):
    for rate, per_window, window in ((3.0, 3, 1.0), (2.5, 5, 2.0)):
        throttle = NotionThrottle(rate, clock=clock, sleep=sleeper)
        start = clock.now()
        moments = []
        for _ in range(20):
            await throttle.acquire()
            moments.append((clock.now() - start).total_seconds())
        for i, moment in enumerate(moments):
            in_window = [m for m in moments[i:] if m < moment + window]
            assert len(in_window) <= per_window
        # …and no slower: bursts of per_window requests, one window (plus 1 ms) apart.
        assert moments[-1] == pytest.approx((math.ceil(20 / per_window) - 1) * window, abs=0.05)


async def test_the_throttle_keeps_concurrent_reads_under_the_emulator_limit_without_sleeping(
    make_client: MakeClient, store: NotionStore, workspace: dict[str, Any], clock: ManualClock
):
    client = make_client()
    start = clock.now()
    with anyio.fail_after(30):  # real seconds: nothing here may really wait
        async with anyio.create_task_group() as group:
            for page in workspace["pages"]:
                group.start_soon(client.read_tree, page["page_id"])
    elapsed = (clock.now() - start).total_seconds()
    assert store.stats.rate_limited.total() == 0
    assert client.requests_sent == store.stats.requests_total > 100
    assert elapsed >= (client.requests_sent - 3) / 3


async def test_a_429_is_retried_after_retry_after_while_the_whole_client_holds_back(
    make_client: MakeClient, store: NotionStore, workspace: dict[str, Any], sleeper: RecordingSleep
):
    store.set_rate_limit(requests_per_second=1, burst=1)
    client = make_client()
    page_id = workspace["pages"][0]["page_id"]
    tree = await client.read_tree(page_id)
    assert list(read_tree_rows(tree)) == list(
        stored_tree(store, stored_page(store, workspace, page_id))
    )
    assert store.stats.rate_limited.total() > 0
    assert any(call == pytest.approx(1.0) for call in sleeper.calls)
    assert client.requests_sent == store.stats.requests_total


async def test_a_retry_after_beyond_the_limit_fails_at_once_with_notion_rate_limited(
    make_client: MakeClient, store: NotionStore, workspace: dict[str, Any]
):
    store.set_rate_limit(requests_per_second=0.01, burst=1)
    client = make_client()
    await client.get_page(workspace["pages"][0]["page_id"])
    with pytest.raises(NotionRateLimited) as caught:
        await client.get_page(workspace["pages"][0]["page_id"])
    assert caught.value.retry_after == 100
    assert caught.value.status == 429
    assert store.stats.requests_total == 2


# --- failures ------------------------------------------------------------------------------------


async def test_server_errors_are_retried_for_reads_and_never_for_writes(
    make_client: MakeClient, store: NotionStore, workspace: dict[str, Any]
):
    client = make_client(max_attempts=4)
    page_id = workspace["pages"][0]["page_id"]
    store.set_faults(fail_ids=[page_id])
    with pytest.raises(NotionUnavailable) as read_failure:
        await client.list_children(page_id)
    assert read_failure.value.upstream_code == "internal_server_error"
    assert read_failure.value.operation == "BlocksChildrenEndpoint.list"
    assert store.stats.requests_by_endpoint["GET /v1/blocks/{block_id}/children"] == 4
    with pytest.raises(NotionUnavailable) as write_failure:
        await client.append_blocks(page_id, [paragraph("una volta sola")])
    assert write_failure.value.may_have_been_sent is True
    assert store.stats.requests_by_endpoint["PATCH /v1/blocks/{block_id}/children"] == 1

    store.clear_faults()
    store.set_faults(error_rate=0.2)
    tree = await client.read_tree(page_id)
    assert store.stats.injected_errors > 4
    assert list(read_tree_rows(tree)) == list(
        stored_tree(store, stored_page(store, workspace, page_id))
    )


async def test_a_missing_notion_version_is_an_invalid_request(
    make_client: MakeClient, workspace: dict[str, Any]
):
    client = make_client(notion_version="")
    with pytest.raises(NotionInvalidRequest) as caught:
        await client.get_page(workspace["pages"][0]["page_id"])
    assert (caught.value.status, caught.value.upstream_code) == (400, "missing_version")


async def test_an_unknown_page_is_notion_not_found_and_is_not_retried(
    make_client: MakeClient, store: NotionStore
):
    with pytest.raises(NotionNotFound) as caught:
        await make_client().get_page("00000000-0000-4000-8000-000000000000")
    assert caught.value.upstream_code == "object_not_found"
    assert store.stats.requests_total == 1


async def test_an_update_the_api_refuses_is_an_invalid_request(
    make_client: MakeClient, workspace: dict[str, Any]
):
    client = make_client()
    block = (await client.list_children(workspace["pages"][0]["page_id"]))[0]
    other_type = "toggle" if block.type != "toggle" else "paragraph"
    with pytest.raises(NotionInvalidRequest) as caught:
        await client.update_block(block.id, other_type, {"rich_text": rich_text("x")})
    assert caught.value.upstream_code == "validation_error"


async def test_a_wrong_token_is_unauthorized_and_no_token_is_ever_shown(
    make_client: MakeClient,
    store: NotionStore,
    workspace: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
):
    wrong = "ntn_" + "w" * 46
    with pytest.raises(NotionUnauthorized) as caught:
        await make_client(token=SecretStr(wrong)).get_page(workspace["pages"][0]["page_id"])
    assert wrong not in f"{caught.value} {caught.value!r}"

    caplog.set_level(logging.DEBUG)
    store.set_rate_limit(requests_per_second=1, burst=1)
    client = make_client()
    logging.getLogger("pmsgate.integrations.notion.client.sdk").setLevel(logging.DEBUG)
    with structlog.testing.capture_logs() as logs:
        await client.read_tree(workspace["pages"][0]["page_id"])
    assert any(entry["event"] == "notion_retry" for entry in logs)
    token = workspace["token"]
    assert token not in caplog.text
    assert token not in repr(logs)
    assert token not in repr(client)
    assert token not in repr(client.throttle)


async def test_the_client_is_configured_by_the_notion_settings(clock: ManualClock):
    settings = Settings(
        notion_api_url="http://notes.test/",
        notion_version="2025-09-03",
        notion_requests_per_second=5,
        notion_timeout_s=7,
    )
    async with httpx.AsyncClient() as http:
        client = NotionClient.from_settings(
            http, token=SecretStr("ntn_x"), settings=settings, clock=clock
        )
        assert (client.base_url, client.notion_version) == ("http://notes.test", "2025-09-03")
        assert client.throttle.requests_per_second == 5
        assert http.headers["Notion-Version"] == "2025-09-03"
        assert "authorization" not in http.headers
        assert http.timeout.read == 7


async def test_an_id_that_would_change_the_request_path_is_refused_without_sending(
    make_client: MakeClient, store: NotionStore
):
    with pytest.raises(NotionInvalidRequest):
        await make_client().get_block("../users")
    assert store.stats.requests_total == 0


# --- the upstream kit ----------------------------------------------------------------------------


class FailingFirst(httpx.AsyncBaseTransport):
    """A transport that fails the first ``count`` requests with ``error``, then passes them on."""

    def __init__(self, inner: httpx.AsyncBaseTransport, error: Exception, count: int) -> None:
        self.inner, self.error, self.count = inner, error, count

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.count > 0:
            self.count -= 1
            raise self.error
        return await self.inner.handle_async_request(request)


async def test_notion_errors_are_upstream_errors_with_notions_request_id(
    make_client: MakeClient, store: NotionStore
):
    with pytest.raises(NotionNotFound) as caught:
        await make_client().get_page("00000000-0000-4000-8000-000000000000")
    error = caught.value
    assert isinstance(error, UpstreamError)
    assert (error.upstream, error.code, error.status) == ("notion", "notes_not_found", 404)
    assert error.request_id and error.request_id in caught.value.as_dict().values()
    assert store.stats.requests_total == 1


async def test_a_read_that_keeps_failing_makes_the_documented_worst_case_of_5_attempts(
    make_client: MakeClient, store: NotionStore, workspace: dict[str, Any]
):
    page_id = workspace["pages"][0]["page_id"]
    store.set_faults(fail_ids=[page_id])
    client = make_client()
    with pytest.raises(NotionUnavailable):
        await client.get_page(page_id)
    assert client.requests_sent == store.stats.requests_total == 5


async def test_a_429_on_a_write_is_retried_because_notion_did_not_process_it(
    make_client: MakeClient, store: NotionStore, workspace: dict[str, Any], sleeper: RecordingSleep
):
    page_id = workspace["pages"][0]["page_id"]
    store.set_rate_limit(requests_per_second=0.5, burst=1)
    client = make_client(requests_per_second=100)
    created = await client.append_blocks(page_id, [paragraph("uno")])
    again = await client.append_blocks(page_id, [paragraph("due")])
    assert store.stats.rate_limited.total() == 1
    assert store.stats.requests_by_endpoint["PATCH /v1/blocks/{block_id}/children"] == 3
    assert sleeper.calls == [pytest.approx(2.0)]  # Retry-After, waited once by the throttle
    children = [b.id for b in await client.list_children(page_id)]
    assert children[-2:] == [created[0].id, again[0].id]


@pytest.mark.parametrize(
    ("error", "attempts"),
    [(httpx.ConnectError("refused"), 2), (httpx.ReadError("connection reset"), 1)],
    ids=["not-sent", "maybe-sent"],
)
async def test_a_write_is_resent_only_after_a_failure_that_proves_nothing_was_sent(
    store: NotionStore,
    clock: ManualClock,
    sleeper: RecordingSleep,
    workspace: dict[str, Any],
    error: Exception,
    attempts: int,
):
    transport = FailingFirst(httpx.ASGITransport(app=create_notion_app(store)), error, 1)
    async with httpx.AsyncClient(transport=transport) as http:
        client = NotionClient(
            http,
            token=SecretStr(workspace["token"]),
            base_url=BASE_URL,
            clock=clock,
            sleep=sleeper,
        )
        page_id = workspace["pages"][0]["page_id"]
        if attempts == 1:
            with pytest.raises(NotionUnavailable) as caught:
                await client.append_blocks(page_id, [paragraph("una volta sola")])
            assert caught.value.may_have_been_sent is True
        else:
            await client.append_blocks(page_id, [paragraph("una volta sola")])
    assert client.requests_sent == attempts
    assert store.stats.blocks_created == (1 if attempts == 2 else 0)


async def test_the_error_table_maps_notion_codes_before_statuses():
    assert ERROR_TABLE.classify(429, "rate_limited") is ErrorKind.RATE_LIMITED
    assert ERROR_TABLE.classify(529, "service_overload") is ErrorKind.UNAVAILABLE
    assert ERROR_TABLE.classify(502, None) is ErrorKind.UNAVAILABLE
    assert ERROR_TABLE.classify(400, "missing_version") is ErrorKind.INVALID_REQUEST
    assert ERROR_TABLE.classify(403, "restricted_resource") is ErrorKind.FORBIDDEN
    assert ERROR_TABLE.classify(418, None) is ErrorKind.UNEXPECTED


# --- Notion versions -----------------------------------------------------------------------------


async def test_the_default_notion_version_is_2025_09_03(make_client: MakeClient):
    assert DEFAULT_NOTION_VERSION == Settings().notion_version == "2025-09-03"
    assert make_client().notion_version == "2025-09-03"


@pytest.mark.parametrize("version", ["2022-06-28", "2025-09-03", "2026-03-11"])
async def test_reads_and_writes_work_at_every_supported_version(
    make_client: MakeClient, store: NotionStore, workspace: dict[str, Any], version: str
):
    client = make_client(notion_version=version)
    pages = await client.query_database(workspace["database_id"])
    assert [p.id for p in pages] == [t["page_id"] for t in workspace["pages"]]
    page_id = pages[0].id
    before = await client.list_children(page_id)
    created = await client.append_blocks(
        page_id, [paragraph(f"inserito {i}") for i in range(120)], after=before[0].id
    )
    after = [b.id for b in await client.list_children(page_id)]
    assert after == [before[0].id, *[b.id for b in created], *[b.id for b in before[1:]]]
    deleted = await client.delete_block(created[0].id)
    assert deleted.archived is True
    assert (await client.get_page(page_id)).title == pages[0].title
