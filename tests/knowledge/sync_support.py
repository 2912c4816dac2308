"""What the knowledge-sync tests share: an enrolled sandbox, the sync on it, upstream tallies."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.integrations.notion.client import NotionClient
from pmsgate.integrations.notion.models import Block
from pmsgate.knowledge.patcher import apply_patch, plan_patch
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.knowledge.template import WifiCredentials, check_page
from pmsgate.sandbox.assistant.store import KbNode
from tests.customers.support import EnrolledSandbox, enrolled_sandbox
from tests.support.clocks import RecordingSleep

# Seed 7, facility 1: four apartments, one of them (Magnolia) without "how to reach".
SEED = 7
STUDENT_INDEX = 1

WRITE_METHODS = ("POST ", "PATCH ", "PUT ", "DELETE ")


def emulated_notes(http: httpx.AsyncClient, token: str, clock: ManualClock) -> NotionClient:
    """A real NotionClient with ``token`` on the notes emulator behind ``http`` (any base
    URL); its waits move ``clock``."""
    return NotionClient(
        http,
        token=SecretStr(token),
        base_url="http://notes.test",
        clock=clock,
        sleep=RecordingSleep(clock),
    )


@asynccontextmanager
async def sync_sandbox(database_url: str, **options: Any) -> AsyncIterator[EnrolledSandbox]:
    """The seeded customer with four apartments, enrolled and its registry synced."""
    options.setdefault("seed", SEED)
    options.setdefault("student_index", STUDENT_INDEX)
    async with enrolled_sandbox(database_url, **options) as enrolled:
        yield enrolled


def knowledge_sync(enrolled: EnrolledSandbox, **options: Any) -> KnowledgeSync:
    """The knowledge sync on the enrolled customer's services."""
    repo = KnowledgeSyncRecords(enrolled.services.sessions, enrolled.clock)
    return KnowledgeSync(enrolled.services, repo, **options)


def assistant_routes(enrolled: EnrolledSandbox) -> Counter[str]:
    """Admitted platform requests by route so far."""
    return Counter(enrolled.sandbox.assistant.stats.requests_by_route)


def assistant_writes(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    """Write requests admitted between two tallies, by route."""
    delta = after - before
    return {route: n for route, n in delta.items() if route.startswith(WRITE_METHODS)}


def notion_requests(enrolled: EnrolledSandbox) -> Counter[str]:
    """Notes requests by endpoint so far."""
    return Counter(enrolled.sandbox.notion.stats.requests_by_endpoint)


async def workspace_id(enrolled: EnrolledSandbox) -> str:
    """The customer's platform workspace id."""
    ctx = await enrolled.context()
    assert ctx.workspace_id is not None
    return ctx.workspace_id


async def managed_nodes(enrolled: EnrolledSandbox) -> list[KbNode]:
    """The documents the sync manages in the customer's workspace, as the emulator holds them."""
    nodes = enrolled.sandbox.assistant.nodes(await workspace_id(enrolled), is_directory=False)
    return [n for n in nodes if str(n.metadata.get("source_key", "")).startswith("pmsgate:")]


async def listing_directories(enrolled: EnrolledSandbox) -> list[KbNode]:
    """The per-listing directories the sync manages."""
    nodes = enrolled.sandbox.assistant.nodes(await workspace_id(enrolled), is_directory=True)
    return [n for n in nodes if n.metadata.get("listing_id")]


def page_truth(enrolled: EnrolledSandbox, title: str) -> dict[str, Any]:
    """The seeded ground truth of one of the customer's pages, by title."""
    return next(p for p in enrolled.notes_pages if p["title"] == title)


async def read_page(enrolled: EnrolledSandbox, page_id: str) -> list[Block]:
    """A page's block tree through the real notes client."""
    async with enrolled.services.notion(await enrolled.context()) as notes:
        return await notes.read_tree(page_id)


async def patch_every_page(enrolled: EnrolledSandbox) -> None:
    """Make every page canonical with the template patcher (spec §4.3 step 13)."""
    async with enrolled.services.notion(await enrolled.context()) as notes:
        for page in enrolled.notes_pages:
            blocks = await notes.read_tree(page["page_id"])
            check = check_page(blocks, page_id=page["page_id"])
            wifi = WifiCredentials.model_validate(
                {"network": page["wifi"]["network"], "password": page["wifi"]["password"]}
            )
            plan = plan_patch(page["page_id"], blocks, check, wifi=wifi)
            outcome = await apply_patch(notes, plan)
            assert outcome.ok
