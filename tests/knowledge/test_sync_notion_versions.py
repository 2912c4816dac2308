"""Everything the knowledge sync does works at Notion-Version 2025-09-03 and at 2022-06-28.

The whole flow per version, on the seeded customer of four apartments: dry run,
template patch, commit, a second commit that writes nothing, an edited page
(text change, deleted block, block appended after another) synced incrementally.
Only the notes endpoints differ between versions, and the emulator refuses the
other version's database query, so a client that mixed them up would fail here.
"""

from __future__ import annotations

from collections import Counter

import pytest

from pmsgate.integrations.notion.builders import paragraph, toggle
from pmsgate.knowledge.template import check_page
from tests.knowledge.sync_support import (
    knowledge_sync,
    managed_nodes,
    notion_requests,
    patch_every_page,
    sync_sandbox,
)

pytestmark = pytest.mark.anyio

DATABASE_READ = {
    "2022-06-28": Counter({"POST /v1/databases/{database_id}/query": 1}),
    "2025-09-03": Counter(
        {"GET /v1/databases/{database_id}": 1, "POST /v1/data_sources/{data_source_id}/query": 1}
    ),
}


@pytest.mark.parametrize("version", sorted(DATABASE_READ))
async def test_the_whole_sync_works_at_the_notion_version(database_url: str, version: str) -> None:
    overrides = {"notion_version": version}
    async with sync_sandbox(database_url, settings_overrides=overrides) as enrolled:
        sync = knowledge_sync(enrolled)
        dry = await sync.dry_run(enrolled.student_id)
        assert (dry.apartments, dry.incomplete_templates, dry.failed) == (4, 1, 0)

        await patch_every_page(enrolled)
        enrolled.clock.advance(120)  # a read in the minute of the edit is not trusted later
        first = await sync.commit(enrolled.student_id)
        assert (first.failed, first.blocked_by_template, first.directories_created) == (0, 0, 4)
        assert len(first.wifi_nodes) == 4 and all(first.wifi_nodes.values())

        before = notion_requests(enrolled)
        second = await sync.commit(enrolled.student_id)
        assert second.created == second.updated == second.deleted == 0
        assert second.unchanged == first.created
        assert notion_requests(enrolled) - before == DATABASE_READ[version]

        page = next(p for p in enrolled.notes_pages if p["title"] == "Apartment Ulivo")
        enrolled.clock.advance(300)
        async with enrolled.services.notion(await enrolled.context()) as notes:
            assert notes.notion_version == version
            blocks = await notes.read_tree(page["page_id"])
            # Toggles that are not canonical sections: editing them keeps the template whole.
            sections = {m.block_id for m in check_page(blocks).sections.values() if m is not None}
            toggles = [
                b for b in blocks if b.type == "toggle" and b.children and b.id not in sections
            ]
            await notes.set_text(toggles[-1].children[0], "Testo cambiato / Changed text")
            await notes.delete_block(toggles[-2].id)
            await notes.append_blocks(
                page["page_id"],
                [toggle("Sauna", [paragraph("Al piano terra.")])],
                after=blocks[0].id,
            )
        enrolled.clock.advance(120)

        third = await sync.commit(enrolled.student_id)
        assert (third.created, third.updated, third.deleted, third.failed) == (1, 1, 1, 0)
        nodes = await managed_nodes(enrolled)
        assert any(n.title == "Sauna" for n in nodes)
        assert any("Testo cambiato / Changed text" in n.body for n in nodes)
        assert len(nodes) == first.created
        assert enrolled.sandbox.notion.stats.errors_by_code == Counter()
