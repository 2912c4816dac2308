"""The knowledge sync against the emulators, through the real clients (issue 5, item 3).

A seeded customer of four apartments (one page lacks "how to reach") is enrolled on
the in-process sandbox; the notes and platform emulators share the test's
ManualClock with the clients, whose waits move it (no real sleeping).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from typer.testing import Result

from pmsgate.integrations.notion.builders import paragraph, toggle
from pmsgate.integrations.notion.models import Block
from pmsgate.knowledge.nodes import FORMAT_VERSION, content_hash, page_nodes, source_key
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync_plan import SYNC_FOLDER_KEY
from pmsgate.knowledge.sync_reports import SyncProgress
from pmsgate.knowledge.template import check_page
from tests.customers.support import EnrolledSandbox
from tests.knowledge.sync_support import (
    assistant_routes,
    assistant_writes,
    knowledge_sync,
    listing_directories,
    managed_nodes,
    notion_requests,
    patch_every_page,
    sync_sandbox,
    workspace_id,
)

pytestmark = pytest.mark.anyio


# --- page → nodes ------------------------------------------------------------------------------


def _block(kind: str, text: str = "", *children: Block, block_id: str, **extra: object) -> Block:
    return Block(
        id=block_id,
        type=kind,
        rich_text=[{"type": "text", "plain_text": text}] if text else [],
        children=list(children),
        has_children=bool(children),
        **extra,
    )


def test_a_page_yields_one_node_per_toggle_and_per_section_with_stable_keys() -> None:
    page = [
        _block("paragraph", "Benvenuti!", block_id="p-0"),
        _block("heading_2", "La casa", block_id="h-group"),  # a group heading: no text of its own
        _block(
            "toggle",
            "Parcheggio",
            _block("paragraph", "Piazza degli Esempi", block_id="p-1"),
            _block("bulleted_list_item", "Strisce blu a pagamento", block_id="p-2"),
            block_id="t-park",
        ),
        _block("heading_2", "Regole della casa", block_id="h-rules"),
        _block("numbered_list_item", "Niente feste", block_id="p-3"),
        _block("numbered_list_item", "Silenzio dopo le 22", block_id="p-4"),
        _block("divider", block_id="d-1"),
        _block(
            "toggle",
            "Elettrodomestici",
            _block(
                "toggle",
                "Forno",
                _block("paragraph", "Elettrico", block_id="p-5"),
                block_id="t-oven",
            ),
            block_id="t-appliances",
        ),
        _block("paragraph", "Grazie!", block_id="p-6"),  # under "Regole della casa" still
        _block("toggle", "Vuoto", block_id="t-empty"),
    ]
    nodes = page_nodes("PAGE-1", page, page_title="Apartment Rosa")
    assert [(n.title, n.body) for n in nodes] == [
        ("Apartment Rosa", "Benvenuti!"),
        ("Parcheggio", "Piazza degli Esempi\n- Strisce blu a pagamento"),
        ("Regole della casa", "1. Niente feste\n2. Silenzio dopo le 22\nGrazie!"),
        ("Elettrodomestici", "Forno\n  Elettrico"),
        ("Vuoto", ""),
    ]
    assert nodes[1].source_key == source_key("page-1", "t-park") == "pmsgate:page1:tpark"
    assert nodes[0].source_key == "pmsgate:page1:intro"
    assert nodes[1].content_hash == content_hash("Parcheggio", nodes[1].body)
    assert FORMAT_VERSION >= 1


def ordinary_toggles(blocks: list[Block]) -> list[Block]:
    """Top-level toggles with children that are not canonical sections (safe to edit)."""
    check = check_page(blocks)
    sections = {m.block_id for m in check.sections.values() if m is not None}
    return [b for b in blocks if b.type == "toggle" and b.children and b.id not in sections]


# --- dry run -----------------------------------------------------------------------------------


@pytest.fixture
async def enrolled(database_url: str) -> AsyncIterator[EnrolledSandbox]:
    """The enrolled customer (see ``sync_sandbox``)."""
    async with sync_sandbox(database_url) as sandbox:
        yield sandbox


async def test_dry_run_counts_apartments_and_incomplete_templates_and_writes_nothing(
    enrolled: EnrolledSandbox,
) -> None:
    before = assistant_routes(enrolled)
    report = await knowledge_sync(enrolled).dry_run(enrolled.student_id)

    incomplete = [p["title"] for p in enrolled.notes_pages if p["sections_missing"]]
    assert incomplete == ["Apartment Magnolia"]
    assert report.counters() == {
        "apartments": 4,
        "unresolvedApartments": 0,
        "incompleteTemplates": 1,
        "failed": 0,
    }
    magnolia = next(d for d in report.details if d.name == "Apartment Magnolia")
    assert magnolia.missing_sections == ["how_to_reach"]
    assert all(d.page_read and d.resolved for d in report.details)
    assert all(30 <= (d.nodes or 0) <= 40 for d in report.details)
    assert assistant_writes(before, assistant_routes(enrolled)) == {}
    assert enrolled.sandbox.assistant.stats.rate_limited.total() == 0
    assert enrolled.sandbox.notion.stats.rate_limited.total() == 0


async def test_dry_run_reports_every_apartment_unresolved_while_the_integration_is_in_error(
    enrolled: EnrolledSandbox,
) -> None:
    await enrolled.break_kross()
    report = await knowledge_sync(enrolled).dry_run(enrolled.student_id)
    # Spec §3, §7: unresolvedApartments equals apartments; templates are still checked.
    assert report.apartments == report.unresolved_apartments == 4
    assert report.incomplete_templates == 1
    assert {d.unresolved_reason for d in report.details} == {"pms_integration_error"}

    # The listings sync then detaches the listings: still every apartment unresolved.
    await enrolled.sync()
    report = await knowledge_sync(enrolled).dry_run(enrolled.student_id)
    assert report.unresolved_apartments == 4
    assert report.active_listings == 0


async def test_dry_run_reports_an_apartment_without_a_listing_as_unresolved(
    enrolled: EnrolledSandbox,
) -> None:
    room_type = enrolled.room_type_ids[0]
    await enrolled.services.apartments.update_listing(enrolled.student_id, room_type, None)
    report = await knowledge_sync(enrolled).dry_run(enrolled.student_id)
    assert report.unresolved_apartments == 1
    unresolved = next(d for d in report.details if not d.resolved)
    assert (unresolved.pms_room_type_id, unresolved.unresolved_reason) == (
        room_type,
        "no_listing",
    )
    assert len(report.unmapped_listings) == 1


async def test_a_second_dry_run_of_unchanged_pages_reads_only_the_apartments_database(
    enrolled: EnrolledSandbox,
) -> None:
    sync = knowledge_sync(enrolled)
    first = await sync.dry_run(enrolled.student_id)
    before = notion_requests(enrolled)
    second = await sync.dry_run(enrolled.student_id)
    assert second.counters() == first.counters()
    assert not any(d.page_read for d in second.details)
    # Notion-Version 2025-09-03: the database names its data source, which is queried.
    assert notion_requests(enrolled) - before == Counter(
        {
            "GET /v1/databases/{database_id}": 1,
            "POST /v1/data_sources/{data_source_id}/query": 1,
        }
    )


# --- commit ------------------------------------------------------------------------------------


async def test_commit_writes_one_directory_per_listing_and_30_to_40_nodes_per_apartment(
    enrolled: EnrolledSandbox,
) -> None:
    sync = knowledge_sync(enrolled)
    events: list[SyncProgress] = []
    report = await sync.commit(enrolled.student_id, progress=events.append)

    counters = report.counters()
    assert 90 <= counters.pop("created") <= 120
    assert counters == {
        "apartments": 4,
        "unresolvedApartments": 0,
        "updated": 0,
        "unchanged": 0,
        "deleted": 0,
        "failed": 0,
        "blockedByTemplate": 1,
        "directoriesCreated": 3,
    }
    assert report.sync_folder_created
    synced = [d for d in report.details if d.status == "synced"]
    assert len(synced) == 3
    assert all(30 <= d.created == d.nodes <= 40 for d in synced)
    assert report.created == sum(d.created for d in synced)
    assert report.wifi_nodes == {d.pms_room_type_id: True for d in synced}
    blocked = next(d for d in report.details if d.status == "blocked_by_template")
    assert blocked.name == "Apartment Magnolia"
    assert blocked.missing_sections == ["how_to_reach"]

    # On the platform: one directory per synced listing under the sync folder, every
    # node in its listing's directory, scoped to it, one node per source key.
    ws = await workspace_id(enrolled)
    folders = [
        n
        for n in enrolled.sandbox.assistant.nodes(ws, is_directory=True)
        if n.metadata.get("source_key") == SYNC_FOLDER_KEY
    ]
    assert len(folders) == 1 and folders[0].entity_ids == []
    directories = await listing_directories(enrolled)
    assert {d.metadata["listing_id"] for d in directories} == {d.listing_id for d in synced}
    assert all(d.parent_id == folders[0].id for d in directories)
    nodes = await managed_nodes(enrolled)
    assert len(nodes) == report.created
    keys = Counter(n.metadata["source_key"] for n in nodes)
    assert max(keys.values()) == 1
    by_listing = {d.metadata["listing_id"]: d.id for d in directories}
    for node in nodes:
        (listing,) = node.entity_ids
        assert node.parent_id == by_listing[listing]

    # The WiFi node carries network and password (the page's).
    for detail in synced:
        truth = next(p for p in enrolled.notes_pages if p["title"] == detail.name)
        wifi = truth["wifi"]
        assert any(
            wifi["network"] in f"{n.title}\n{n.body}" and wifi["password"] in f"{n.title}\n{n.body}"
            for n in nodes
            if n.entity_ids == [detail.listing_id]
        )

    # Progress: per apartment and per node, ending complete.
    assert events[-1].apartments_done == events[-1].apartments_total == 4
    assert events[-1].nodes_done == events[-1].nodes_total == report.created
    assert max(e.nodes_done for e in events) == report.created
    assert enrolled.sandbox.assistant.stats.rate_limited.total() == 0
    assert enrolled.sandbox.notion.stats.rate_limited.total() == 0


async def test_after_patching_the_templates_the_commit_syncs_every_listing(
    enrolled: EnrolledSandbox,
) -> None:
    await patch_every_page(enrolled)
    sync = knowledge_sync(enrolled)
    dry = await sync.dry_run(enrolled.student_id)
    assert (dry.unresolved_apartments, dry.incomplete_templates) == (0, 0)
    report = await sync.commit(enrolled.student_id)
    assert report.directories_created == 4
    assert (report.failed, report.blocked_by_template) == (0, 0)
    assert all(30 <= d.created <= 40 for d in report.details)
    assert len(report.wifi_nodes) == 4 and all(report.wifi_nodes.values())


async def test_a_second_commit_of_unchanged_pages_writes_nothing(enrolled: EnrolledSandbox) -> None:
    sync = knowledge_sync(enrolled)
    first = await sync.commit(enrolled.student_id)
    assistant_before, notion_before = assistant_routes(enrolled), notion_requests(enrolled)

    second = await sync.commit(enrolled.student_id)

    assert second.created == second.updated == second.deleted == 0
    assert second.directories_created == 0 and not second.sync_folder_created
    assert second.unchanged == first.created
    assert second.wifi_nodes == first.wifi_nodes
    assert assistant_writes(assistant_before, assistant_routes(enrolled)) == {}
    # Reads: the listings and the nodes (100 a page); the notes side lists the database.
    in_workspace = len(enrolled.sandbox.assistant.nodes(await workspace_id(enrolled)))
    assert assistant_routes(enrolled) - assistant_before == Counter(
        {"GET /v1/listings": 1, "GET /v1/kb/nodes": math.ceil(in_workspace / 100)}
    )
    assert notion_requests(enrolled) - notion_before == Counter(
        {
            "GET /v1/databases/{database_id}": 1,
            "POST /v1/data_sources/{data_source_id}/query": 1,
        }
    )
    assert len(await managed_nodes(enrolled)) == first.created


async def test_an_edited_page_updates_only_its_changed_nodes(enrolled: EnrolledSandbox) -> None:
    sync = knowledge_sync(enrolled)
    first = await sync.commit(enrolled.student_id)
    page = next(p for p in enrolled.notes_pages if p["title"] == "Apartment Ulivo")
    enrolled.clock.advance(300)
    async with enrolled.services.notion(await enrolled.context()) as notes:
        blocks = await notes.read_tree(page["page_id"])
        toggles = ordinary_toggles(blocks)
        edited, removed = toggles[3], toggles[5]
        await notes.set_text(edited.children[0], "Testo cambiato / Changed text")
        await notes.delete_block(removed.id)
        await notes.append_blocks(
            page["page_id"], [toggle("Sauna", [paragraph("La sauna è al piano terra.")])]
        )
    enrolled.clock.advance(120)
    before = assistant_routes(enrolled)

    report = await sync.commit(enrolled.student_id)

    ulivo = next(d for d in report.details if d.name == "Apartment Ulivo")
    assert (ulivo.created, ulivo.updated, ulivo.deleted) == (1, 1, 1)
    assert ulivo.page_read
    others = [d for d in report.details if d.status not in ("blocked_by_template",)]
    assert all(not d.page_read for d in others if d.name != "Apartment Ulivo")
    assert (report.created, report.updated, report.deleted) == (1, 1, 1)
    assert report.unchanged == first.created - 2
    assert assistant_writes(before, assistant_routes(enrolled)) == {
        "POST /v1/kb/nodes": 1,
        "PATCH /v1/kb/nodes/{node_id}": 1,
        "DELETE /v1/kb/nodes/{node_id}": 1,
    }
    nodes = {n.metadata["source_key"]: n for n in await managed_nodes(enrolled)}
    assert "Testo cambiato / Changed text" in nodes[source_key(page["page_id"], edited.id)].body
    assert source_key(page["page_id"], removed.id) not in nodes
    assert any(n.title == "Sauna" for n in nodes.values())


async def test_an_edit_in_the_same_minute_as_the_last_read_is_not_missed(
    enrolled: EnrolledSandbox,
) -> None:
    sync = knowledge_sync(enrolled)
    await sync.commit(enrolled.student_id)
    page = next(p for p in enrolled.notes_pages if p["title"] == "Apartment Giglio")
    # Start of a fresh minute: the page's last_edited_time (to the minute) will be it.
    now = enrolled.clock.now()
    minute = now.replace(second=0, microsecond=0) + timedelta(minutes=2)
    enrolled.clock.set(minute + timedelta(seconds=1))
    async with enrolled.services.notion(await enrolled.context()) as notes:
        blocks = await notes.read_tree(page["page_id"])
        toggles = ordinary_toggles(blocks)
        await notes.set_text(toggles[1].children[0], "Prima modifica")
        first_edit = await sync.commit(enrolled.student_id)
        assert first_edit.updated == 1
        assert enrolled.clock.now() < minute + timedelta(seconds=50)

        # Same minute again: the page's stamp does not move, yet the change is found.
        await notes.set_text(toggles[2].children[0], "Seconda modifica")
    assert (await notion_last_edited(enrolled, page["page_id"])) == minute
    second_edit = await sync.commit(enrolled.student_id)
    assert second_edit.updated == 1

    # Once that minute is over, the page is trusted unchanged and not read again.
    enrolled.clock.advance(120)
    await sync.commit(enrolled.student_id)  # reads it once more (its read was in-minute)
    quiet = await sync.commit(enrolled.student_id)
    giglio = next(d for d in quiet.details if d.name == "Apartment Giglio")
    assert (giglio.status, giglio.page_read) == ("unchanged", False)


async def notion_last_edited(enrolled: EnrolledSandbox, page_id: str) -> datetime:
    async with enrolled.services.notion(await enrolled.context()) as notes:
        page = await notes.get_page(page_id)
    assert page.last_edited_time is not None
    return page.last_edited_time.astimezone(UTC)


async def test_a_sync_cancelled_midway_and_run_again_finishes_without_duplicates(
    enrolled: EnrolledSandbox,
) -> None:
    sync = knowledge_sync(enrolled)
    with anyio.CancelScope() as scope:

        def kill_after_40_nodes(event: SyncProgress) -> None:
            if event.nodes_done >= 40:
                scope.cancel()  # as a process killed mid-write would stop

        await sync.commit(enrolled.student_id, progress=kill_after_40_nodes)
    assert scope.cancelled_caught
    # In process, a task runs on until its next wait: a few more nodes may land.
    written = len(await managed_nodes(enrolled))
    assert written >= 40

    resumed = await sync.commit(enrolled.student_id)

    assert resumed.failed == 0
    assert resumed.created > 0 and written == resumed.unchanged
    assert resumed.created + resumed.unchanged == resumed.nodes
    nodes = await managed_nodes(enrolled)
    assert len(nodes) == resumed.nodes
    assert max(Counter(n.metadata["source_key"] for n in nodes).values()) == 1
    assert len(await listing_directories(enrolled)) == 3
    again = await sync.commit(enrolled.student_id)
    assert again.created == again.updated == again.deleted == 0


async def test_one_failing_apartment_is_reported_and_the_others_are_synced(
    enrolled: EnrolledSandbox,
) -> None:
    ulivo = next(p for p in enrolled.notes_pages if p["title"] == "Apartment Ulivo")
    enrolled.sandbox.notion.set_faults(fail_ids=[ulivo["page_id"]])
    sync = knowledge_sync(enrolled)

    report = await sync.commit(enrolled.student_id)

    assert report.failed == 1
    failed = next(d for d in report.details if d.status == "failed")
    assert failed.name == "Apartment Ulivo"
    assert failed.error is not None and failed.error.code == "notes_unavailable"
    assert report.errors == {failed.pms_room_type_id: failed.error}
    assert report.wifi_nodes[failed.pms_room_type_id] is False
    assert sum(d.status == "synced" for d in report.details) == 2

    enrolled.sandbox.notion.clear_faults()
    healed = await sync.commit(enrolled.student_id)
    assert healed.failed == 0
    assert healed.created == next(d.created for d in healed.details if d.name == "Apartment Ulivo")
    assert all(healed.wifi_nodes.values()) and len(healed.wifi_nodes) == 3


async def test_a_429_storm_from_the_assistant_is_survived_without_exceeding_its_limit(
    enrolled: EnrolledSandbox,
) -> None:
    store = enrolled.sandbox.assistant
    admitted: list[float] = []
    admit = store.admit

    def recording_admit(scope: str, route: str) -> None:
        admit(scope, route)
        admitted.append(store.now().timestamp())

    store.admit = recording_admit
    async with enrolled.http() as http:
        answer = await http.put("/assistant/_sandbox/config", json={"requests_per_minute": 20})
        answer.raise_for_status()

    report = await knowledge_sync(enrolled).commit(enrolled.student_id)

    assert store.stats.rate_limited.total() > 10  # the storm happened
    assert report.failed == 0 and report.directories_created == 3
    assert len(await managed_nodes(enrolled)) == report.created > 90
    # The emulator never admitted more than 20 requests in any sliding minute.
    for index, start in enumerate(admitted):
        assert sum(1 for t in admitted[index:] if t < start + 60) <= 20


async def test_commit_while_the_integration_is_in_error_touches_no_node(
    enrolled: EnrolledSandbox,
) -> None:
    sync = knowledge_sync(enrolled)
    first = await sync.commit(enrolled.student_id)
    await enrolled.break_kross()
    before = assistant_routes(enrolled)

    report = await sync.commit(enrolled.student_id)

    assert report.unresolved_apartments == report.apartments == 4
    assert report.created == report.updated == report.deleted == 0
    assert assistant_writes(before, assistant_routes(enrolled)) == {}
    # An outage of the booking system does not empty the assistant's knowledge.
    assert len(await managed_nodes(enrolled)) == first.created
    await enrolled.restore_kross()
    assert (await sync.commit(enrolled.student_id)).unchanged == first.created


async def test_a_node_edited_or_deleted_on_the_assistant_is_repaired(
    enrolled: EnrolledSandbox,
) -> None:
    sync = knowledge_sync(enrolled)
    first = await sync.commit(enrolled.student_id)
    nodes = await managed_nodes(enrolled)
    store = enrolled.sandbox.assistant
    store.update_node(nodes[0].id, {"body": "vandalised"})
    store.delete_node(nodes[1].id)

    report = await sync.commit(enrolled.student_id)

    assert (report.created, report.updated) == (1, 1)
    assert report.unchanged == first.created - 2
    repaired = {n.metadata["source_key"]: n for n in await managed_nodes(enrolled)}
    assert repaired[nodes[0].metadata["source_key"]].body == nodes[0].body
    assert nodes[1].metadata["source_key"] in repaired


# --- the command line ----------------------------------------------------------------------------


@contextmanager
def sync_command_on(
    enrolled: EnrolledSandbox, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Result]]:
    """`pmsgate knowledge sync --student <the customer> <args>` on the sandbox, in-process."""
    from typer.testing import CliRunner

    from pmsgate.cli import app
    from pmsgate.cli.knowledge import upstreams
    from pmsgate.config import get_settings
    from tests.customers.support import sandbox_http_factory

    settings = enrolled.settings
    assert settings.secret_keys is not None and settings.assistant_api_token is not None
    for name, value in {
        "PMSGATE_DATABASE_URL": database_url,
        "PMSGATE_SECRET_KEYS": settings.secret_keys.get_secret_value(),
        "PMSGATE_ASSISTANT_API_URL": settings.assistant_api_url,
        "PMSGATE_ASSISTANT_API_TOKEN": settings.assistant_api_token.get_secret_value(),
        "PMSGATE_NOTION_API_URL": settings.notion_api_url,
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    monkeypatch.setattr(upstreams, "http_factory", sandbox_http_factory(enrolled.app))
    monkeypatch.setattr(upstreams, "clock", enrolled.clock)
    monkeypatch.setattr(upstreams, "sleep", enrolled.sleep)
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(
            app,
            ["knowledge", "sync", "--student", enrolled.student_id, *args],
            env={"COLUMNS": "200"},
        )

    try:
        yield invoke
    finally:
        get_settings.cache_clear()


async def test_the_sync_command_prints_the_counters_and_a_second_commit_creates_nothing(
    enrolled: EnrolledSandbox, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sync_command_on(enrolled, database_url, monkeypatch) as sync_command:

        async def invoke(*args: str) -> tuple[int, str]:
            # The command runs its own event loop: give it a thread of its own.
            result = await anyio.to_thread.run_sync(lambda: sync_command(*args))
            return result.exit_code, result.stdout

        code, out = await invoke()
        assert code == 0, out
        assert "incompleteTemplates" in out and "Apartment Magnolia" in out
        code, out = await invoke("--commit", "--json")
        assert code == 0, out
        first = json.loads(out)
        assert first["directoriesCreated"] == 3 and first["created"] > 90
        assert first["jobId"]
        code, out = await invoke("--commit", "--json")
        second = json.loads(out)
        assert (code, second["created"], second["unchanged"]) == (0, 0, first["created"])
        # The password is in the WiFi nodes, never in what the command prints.
        for page in enrolled.notes_pages:
            assert page["wifi"]["password"] not in out


async def test_a_sync_refused_inside_the_jobs_task_group_ends_with_a_clear_error_not_a_traceback(
    enrolled: EnrolledSandbox, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = KnowledgeSyncRecords(enrolled.services.sessions, enrolled.clock)
    # Another process runs a sync for this customer (and beats).
    await repo.create_job("a-running-job", enrolled.student_id, "commit", runner_id="other")
    running = await repo.start_job("a-running-job")
    with sync_command_on(enrolled, database_url, monkeypatch) as sync_command:
        result = await anyio.to_thread.run_sync(lambda: sync_command("--commit"))

    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert "sync_already_running" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "ExceptionGroup" not in result.stdout + result.stderr
    assert (await repo.get_job(running.id)).status == "running"
