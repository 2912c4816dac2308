"""The notes emulator's state: seeding, the request checks every route runs, shared helpers.

Every other module of the store is a mixin on :class:`StoreCore`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import TypeVar

from pmsgate.clock import Clock, SystemClock
from pmsgate.sandbox.kross.seed import FACILITY_COUNT, build_facilities
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.sandbox.notion import errors
from pmsgate.sandbox.notion.errors import NotionApiError, not_found
from pmsgate.sandbox.notion.seed import DATABASE_TITLE, build_workspaces
from pmsgate.sandbox.notion.store.parsing import normalise_id, parse_children
from pmsgate.sandbox.notion.store.records import (
    Block,
    Database,
    Faults,
    NewBlock,
    Page,
    Stats,
    TokenBucket,
    User,
    Workspace,
    seeded_values,
)

# Versions the emulator answers (developers.notion.com/reference/changes-by-version).
# From DATA_SOURCES_VERSION on, a database is a container of data sources, queried at
# /v1/data_sources/{id}/query; from POSITION_VERSION on, appends take ``position``
# instead of ``after`` and objects report ``in_trash`` only (no ``archived``).
SUPPORTED_VERSIONS = frozenset(
    {"2021-05-13", "2021-08-16", "2022-02-22", "2022-06-28", "2025-09-03", "2026-03-11"}
)
DATA_SOURCES_VERSION = "2025-09-03"
POSITION_VERSION = "2026-03-11"
DEFAULT_REQUESTS_PER_SECOND = 3.0
DEFAULT_BURST = 10


# What a route looks up by id in its workspace.
_O = TypeVar("_O", Page, Database)


class StoreCore:
    """State of the notes-workspace emulator and what every route needs of it."""

    def __init__(
        self,
        seed: int = 1,
        clock: Clock | None = None,
        kross: KrossStore | None = None,
        facility_count: int = FACILITY_COUNT,
    ) -> None:
        self.seed = seed
        self.clock: Clock = clock or (kross.clock if kross is not None else SystemClock())
        self.kross = kross
        self.facility_count = facility_count
        self.reset()

    def _owned(self, objects: Mapping[str, _O], workspace: Workspace, kind: str, key: str) -> _O:
        """The workspace's ``kind`` (a page, a database) with id ``key``, or object_not_found."""
        found = objects.get(normalise_id(key, f"path.{kind}_id"))
        if found is None or found.workspace_id != workspace.id:
            raise not_found(kind, key)
        return found

    def reset(self) -> None:
        """Back to the seed data as of the clock's time: no changes, stats, faults or limits."""
        now = self.clock.now()
        # Same facilities as the booking-system emulator: its live state when given, else its seed.
        facilities = (
            self.kross.facilities()
            if self.kross is not None
            else build_facilities(self.seed, now, self.facility_count)
        )
        self._ids = random.Random(f"notes-block-ids-{self.seed}")
        self._workspaces: dict[str, Workspace] = {}
        self._by_token: dict[str, str] = {}
        self._databases: dict[str, Database] = {}
        self._data_sources: dict[str, str] = {}
        self._pages: dict[str, Page] = {}
        self._blocks: dict[str, Block] = {}
        self.requests_per_second = DEFAULT_REQUESTS_PER_SECOND
        self.burst = DEFAULT_BURST
        for ws in build_workspaces(self.seed, now, facilities):
            workspace = Workspace(
                **ws.facts(),
                bucket=self._new_bucket(now.timestamp()),
                truth=[p.truth for p in ws.pages],
                users=seeded_users(self.seed, ws.id, ws.bot_id),
            )
            self._workspaces[ws.id] = workspace
            self._by_token[ws.token] = ws.id
            database = Database(
                id=ws.database_id,
                data_source_id=ws.data_source_id,
                workspace_id=ws.id,
                title=DATABASE_TITLE,
                created_time=ws.created_time,
                last_edited_time=ws.created_time,
            )
            self._databases[database.id] = database
            self._data_sources[ws.data_source_id] = database.id
            for index, seeded in enumerate(ws.pages):
                page = Page(
                    id=seeded.id,
                    workspace_id=ws.id,
                    database_id=database.id,
                    values=seeded_values(database.schema, seeded, index),
                    created_time=seeded.created_time,
                    last_edited_time=seeded.created_time,
                )
                self._pages[page.id] = page
                database.page_ids.append(page.id)
                # Seed content may exceed the per-request limits (e.g. a toggle of 120 children).
                tree = parse_children(seeded.blocks, "seed", level=1, limits=False)
                for spec in tree:
                    self._create(workspace, page, page, spec, seeded.created_time)
        self.faults = Faults()
        self.stats = Stats()
        # Seeded so that a given error rate fails the same requests on every run.
        self._fault_rng = random.Random(self.seed)

    @staticmethod
    def check_version(value: str | None) -> str:
        """The request's Notion-Version, or missing_version / validation_error."""
        if not value:
            raise NotionApiError(errors.MISSING_VERSION)
        if value not in SUPPORTED_VERSIONS:
            raise NotionApiError(
                errors.INVALID_VERSION,
                "Notion-Version header failed validation: Notion-Version header should be one "
                f"of {sorted(SUPPORTED_VERSIONS)}, instead was `{value}`.",
            )
        return value

    def authenticate(self, token: str | None) -> Workspace:
        """The workspace an integration token opens, or unauthorized."""
        workspace_id = self._by_token.get(token or "")
        if workspace_id is None:
            raise NotionApiError(errors.UNAUTHORIZED)
        return self._workspaces[workspace_id]

    def record_request(self, endpoint: str) -> None:
        """Count one request (endpoint = method and route template)."""
        self.stats.requests_total += 1
        self.stats.requests_by_endpoint[endpoint] += 1

    def record_error(self, code: str) -> None:
        """Count one error answer by its code."""
        self.stats.errors_by_code[code] += 1

    def admit(self, workspace: Workspace) -> None:
        """Take one request from the workspace's bucket, or refuse with 429 and Retry-After."""
        self.stats.requests_by_workspace[workspace.id] += 1
        wait = workspace.bucket.take(self.clock.now().timestamp())
        if wait is not None:
            self.stats.rate_limited[workspace.id] += 1
            raise NotionApiError(errors.RATE_LIMITED, headers={"Retry-After": str(wait)})

    def draw_fault(self, path: str) -> NotionApiError | None:
        """The injected error this request gets, if any."""
        compact = path.replace("-", "")  # ids may be sent with or without dashes
        if any(i.replace("-", "") in compact for i in self.faults.fail_ids):
            self.stats.injected_errors += 1
            return NotionApiError(errors.INTERNAL_SERVER_ERROR)
        if self.faults.error_rate > 0 and self._fault_rng.random() < self.faults.error_rate:
            self.stats.injected_errors += 1
            return NotionApiError(errors.SERVICE_UNAVAILABLE)
        return None

    def workspace_of(self, node: Page | Block | Database) -> Workspace:
        """The workspace an object lives in."""
        return self._workspaces[node.workspace_id]

    def _new_bucket(self, now: float) -> TokenBucket:
        return TokenBucket(self.requests_per_second, self.burst, float(self.burst), now)

    def _new_id(self) -> str:
        return str(uuid.UUID(int=self._ids.getrandbits(128), version=4))

    def _create(
        self,
        workspace: Workspace,
        page: Page,
        parent: Page | Block,
        spec: NewBlock,
        now: datetime,
        *,
        attach: bool = True,
    ) -> Block:
        block = Block(
            id=self._new_id(),
            workspace_id=workspace.id,
            page_id=page.id,
            parent_type="page_id" if isinstance(parent, Page) else "block_id",
            parent_id=parent.id,
            type=spec.type,
            content=spec.content,
            created_time=now,
            last_edited_time=now,
        )
        self._blocks[block.id] = block
        if attach:
            parent.children.append(block.id)
        for child in spec.children:
            self._create(workspace, page, block, child, now)
        return block


_PEOPLE = (("Giulia Esempio", "giulia"), ("Marco Prova", "marco"))


def seeded_users(seed: int, workspace_id: str, bot_id: str) -> list[User]:
    """The bot and two fictitious people; drawn from their own generator, not the seed's."""
    rng = random.Random(f"notes-users-{seed}-{workspace_id}")
    people = [
        User(
            id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            type="person",
            name=name,
            email=f"{handle}@example.invalid",
        )
        for name, handle in _PEOPLE
    ]
    return [User(id=bot_id, type="bot", name="pmsgate"), *people]
