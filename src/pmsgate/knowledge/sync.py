"""The knowledge sync (spec §4.3 steps 12 and 14): apartments' notes pages → KB nodes per listing.

**Dry run** (``commit=false``) reads and checks, writes nothing upstream:
``apartments`` (the customer's registry rows), ``unresolvedApartments`` (rows that
cannot be tied to an active listing — all of them while the booking-system
integration is in ``error``, spec §3), ``incompleteTemplates`` (pages failing the
template check, or rows without a notes page).

**Commit** (``commit=true``) writes, under one root directory node
:data:`SYNC_FOLDER_TITLE` (the "sync folder"), one directory per listing
(``entity_ids=[listing]``) and in it one node per toggle or section of the
apartment's page (:mod:`pmsgate.knowledge.nodes`), each scoped to the listing with
``entity_ids`` and carrying its source key and content hash in ``metadata``.
Apartments whose template is incomplete are ``blockedByTemplate`` and not touched;
unresolved ones are not touched either (their existing nodes stay: a booking-system
outage must not empty the assistant's knowledge). ``directoriesCreated`` counts
listing directories only; the sync folder's creation is ``syncFolderCreated``.

**Idempotent and incremental.**

- The platform is the ground truth: every commit lists the workspace's nodes once
  and matches them by the source key in their metadata, so a re-run updates in
  place and a sync stopped half-way (crash, kill) finishes without duplicates.
  Extra nodes with one source key (should one ever exist) are deleted.
- A node is written only when its title/body hash (computed from what the platform
  returns, so a hand edit is repaired), its directory or its listing differ.
- Nodes for blocks that left the page are **deleted** (not disabled: a disabled
  copy would still clutter the knowledge base and a returning block gets a new node).
- A page is not re-read in depth when its ``last_edited_time`` equals the stored one
  and the stored read began after that minute was over (the API rounds the time
  down to the minute, so an edit later in the same minute keeps the stamp), and the
  platform still holds exactly the nodes stored for it.
- Writes carry idempotency keys derived from the source key, the content hash and
  the run, so the client's retries of a write never duplicate it while a later run
  never gets a stale replay of an earlier one.

**Limits.** The notes client throttles itself to ~3 requests/second per token and
the platform client to 100 requests/minute per workspace; apartments run a few at
a time (pages read two at a time) so the throttles, not the concurrency, set the
pace. A 429 or an outage that outlasts a client's own retries is waited out here
(``Retry-After``), a bounded number of times.

**Failures.** One failing apartment is reported in ``failed`` (with its error) and
does not stop the others; failures that concern the whole customer (no workspace,
notes not connected, listings or nodes unreadable) raise a :class:`PmsgateError`.
The WiFi password never reaches a log or a report.
"""

from __future__ import annotations

import hashlib
import inspect
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, TypeVar

import anyio
import structlog
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pmsgate.catalogue import KnowledgeTemplate, load_catalogue
from pmsgate.clock import Clock, Sleep
from pmsgate.customers.context import CustomerContext, CustomerServices
from pmsgate.customers.service import upstream_error, workspace_not_created
from pmsgate.errors import PmsgateError
from pmsgate.integrations.assistant.client import (
    AssistantClient,
    KbNode,
    KbNodeUpdate,
    Listing,
    NewKbNode,
)
from pmsgate.integrations.assistant.errors import (
    PlatformError,
    PlatformNotFound,
    PlatformRateLimited,
    PlatformUnavailable,
)
from pmsgate.integrations.notion.client import (
    ApartmentPage,
    NotesClient,
    NotesConflict,
    NotesError,
    NotesRateLimited,
    NotesUnavailable,
)
from pmsgate.knowledge.nodes import (
    FORMAT_VERSION,
    SOURCE_PREFIX,
    NodeDraft,
    content_hash,
    normalise_id,
    page_nodes,
)
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.template import WIFI, PageCheck, check_page
from pmsgate.storage.apartments import ApartmentView
from pmsgate.storage.knowledge import PageStateView

log = structlog.get_logger(__name__)

SYNC_FOLDER_TITLE = "Knowledge sync"
SYNC_FOLDER_KEY = f"{SOURCE_PREFIX}:sync-folder"
MANAGED_BY = "pmsgate-knowledge-sync"
# Extra seconds on top of the minute the notes API rounds to, for the clocks' disagreement.
CLOCK_SKEW_S = 5.0

SyncKind = Literal["dry_run", "commit"]
ApartmentStatus = Literal["synced", "unchanged", "blocked_by_template", "unresolved", "failed"]
UnresolvedReason = Literal[
    "pms_not_linked", "pms_integration_error", "no_listing", "listing_not_active"
]
T = TypeVar("T")


# --- reports -----------------------------------------------------------------------------------


class _Camel(BaseModel):
    """Reports speak the specification's camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view with the specification's names."""
        return self.model_dump(mode="json", by_alias=True)


class ApartmentError(_Camel):
    """Why one apartment failed (an upstream or service error code, never page content)."""

    code: str
    message: str


class ApartmentCheck(_Camel):
    """What the dry run found for one apartment."""

    pms_room_type_id: str
    name: str
    listing_id: str | None
    notes_page_id: str | None
    resolved: bool
    unresolved_reason: UnresolvedReason | None = None
    template_complete: bool | None = None
    missing_sections: list[str] = Field(default_factory=list)
    wifi_found: bool | None = None
    nodes: int | None = None
    page_read: bool = Field(
        default=False, description="False when the stored check of an unchanged page was used."
    )
    error: ApartmentError | None = None


class DryRunReport(_Camel):
    """The dry run's counters (spec §4.3 step 12) and what stands behind them."""

    student_id: str
    apartments: int
    unresolved_apartments: int
    incomplete_templates: int
    failed: int = 0
    active_listings: int = 0
    unmapped_listings: list[str] = Field(default_factory=list)
    details: list[ApartmentCheck] = Field(default_factory=list)

    def counters(self) -> dict[str, int]:
        """The specification's dry-run counters."""
        return {
            "apartments": self.apartments,
            "unresolvedApartments": self.unresolved_apartments,
            "incompleteTemplates": self.incomplete_templates,
            "failed": self.failed,
        }


class ApartmentSync(_Camel):
    """What the commit did for one apartment."""

    pms_room_type_id: str
    name: str
    listing_id: str | None
    notes_page_id: str | None
    status: ApartmentStatus
    unresolved_reason: UnresolvedReason | None = None
    missing_sections: list[str] = Field(default_factory=list)
    nodes: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    directory_created: bool = False
    wifi_node: bool | None = None
    page_read: bool = False
    error: ApartmentError | None = None


class CommitReport(_Camel):
    """The commit's counters (spec §4.3 step 14) and what stands behind them."""

    student_id: str
    apartments: int
    unresolved_apartments: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    blocked_by_template: int = 0
    directories_created: int = 0
    sync_folder_created: bool = False
    nodes: int = 0
    wifi_nodes: dict[str, bool] = Field(
        default_factory=dict,
        description="Per apartment (room type id): whether its WiFi node with network and "
        "password is on the platform.",
    )
    errors: dict[str, ApartmentError] = Field(default_factory=dict)
    details: list[ApartmentSync] = Field(default_factory=list)

    def counters(self) -> dict[str, int]:
        """The specification's commit counters, plus updated/unchanged/deleted."""
        return {
            "apartments": self.apartments,
            "unresolvedApartments": self.unresolved_apartments,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "failed": self.failed,
            "blockedByTemplate": self.blocked_by_template,
            "directoriesCreated": self.directories_created,
        }


@dataclass(frozen=True)
class SyncProgress:
    """Where a running sync is: apartments and nodes done out of those known so far."""

    kind: SyncKind
    apartments_total: int
    apartments_done: int
    nodes_total: int
    nodes_done: int
    apartment: str | None
    counters: dict[str, int]


ProgressCallback = Callable[[SyncProgress], Awaitable[None] | None]


# --- internals ---------------------------------------------------------------------------------


@dataclass
class _Apartment:
    row: ApartmentView
    listing: Listing | None
    reason: UnresolvedReason | None
    page: ApartmentPage | None = None

    @property
    def label(self) -> str:
        return self.row.name or self.row.pms_room_type_id

    @property
    def page_id(self) -> str | None:
        return self.row.notes_page_id


@dataclass
class _Plan:
    ctx: CustomerContext
    workspace_id: str
    listings: list[Listing]
    apartments: list[_Apartment]

    @property
    def unmapped_listings(self) -> list[str]:
        mapped = {a.row.assistant_listing_id for a in self.apartments}
        return [listing.id for listing in self.listings if listing.id not in mapped]


@dataclass
class _Read:
    """A page read in depth: its check and its nodes."""

    check: PageCheck
    drafts: list[NodeDraft]
    wifi_key: str | None
    wifi_ok: bool


@dataclass
class _Index:
    """The workspace's nodes that this sync manages, by what they stand for."""

    folders: list[KbNode] = field(default_factory=list)
    directories: dict[str, list[KbNode]] = field(default_factory=dict)
    by_page: dict[str, list[KbNode]] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Sequence[KbNode]) -> _Index:
        index = cls()
        for node in sorted(nodes, key=lambda n: (n.created_at is None, n.created_at, n.id)):
            meta = node.metadata or {}
            key = str(meta.get("source_key") or "")
            if not key.startswith(f"{SOURCE_PREFIX}:"):
                continue
            if node.is_directory and key == SYNC_FOLDER_KEY:
                index.folders.append(node)
            elif node.is_directory and meta.get("listing_id"):
                index.directories.setdefault(str(meta["listing_id"]), []).append(node)
            elif not node.is_directory and meta.get("notes_page_id"):
                page = normalise_id(str(meta["notes_page_id"]))
                index.by_page.setdefault(page, []).append(node)
        return index


class _Tally:
    """Counters of a run, and the progress they make."""

    def __init__(self, kind: SyncKind, total: int, callback: ProgressCallback | None) -> None:
        self.kind = kind
        self.apartments_total = total
        self.apartments_done = 0
        self.nodes_total = 0
        self.nodes_done = 0
        self.counters: dict[str, int] = {}
        self._callback = callback

    def add(self, **counts: int) -> None:
        for name, value in counts.items():
            self.counters[name] = self.counters.get(name, 0) + value

    async def report(self, apartment: str | None = None) -> None:
        if self._callback is None:
            return
        event = SyncProgress(
            kind=self.kind,
            apartments_total=self.apartments_total,
            apartments_done=self.apartments_done,
            nodes_total=self.nodes_total,
            nodes_done=self.nodes_done,
            apartment=apartment,
            counters=dict(self.counters),
        )
        outcome = self._callback(event)
        if inspect.isawaitable(outcome):
            await outcome


class KnowledgeSync:
    """Dry run and commit of a customer's knowledge sync (see the module docstring)."""

    def __init__(
        self,
        services: CustomerServices,
        repo: KnowledgeSyncRecords,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        template: KnowledgeTemplate | None = None,
        max_concurrent_apartments: int = 4,
        page_read_concurrency: int = 2,
        folder_title: str = SYNC_FOLDER_TITLE,
        max_upstream_rounds: int = 6,
        max_upstream_wait_s: float = 120.0,
        max_rate_limited_wait_s: float = 900.0,
    ) -> None:
        if max_concurrent_apartments < 1 or page_read_concurrency < 1:
            raise ValueError("concurrency bounds must be at least 1")
        self.services = services
        self.repo = repo
        self.clock = clock or services.clock
        self._sleep = sleep or services.sleep
        self._template = template
        self.max_concurrent_apartments = max_concurrent_apartments
        self.page_read_concurrency = page_read_concurrency
        self.folder_title = folder_title
        self.max_upstream_rounds = max_upstream_rounds
        self.max_upstream_wait_s = max_upstream_wait_s
        self.max_rate_limited_wait_s = max_rate_limited_wait_s

    @property
    def template(self) -> KnowledgeTemplate:
        """The knowledge template pages are checked against (the catalogue's by default)."""
        if self._template is None:
            self._template = load_catalogue().knowledge
        return self._template

    @property
    def platform(self) -> AssistantClient:
        """The assistant-platform client."""
        return self.services.platform

    async def run(
        self, student_id: str, *, commit: bool, progress: ProgressCallback | None = None
    ) -> DryRunReport | CommitReport:
        """A dry run or a commit, as the web endpoint's ``{commit}`` says."""
        if commit:
            return await self.commit(student_id, progress=progress)
        return await self.dry_run(student_id, progress=progress)

    # --- dry run -------------------------------------------------------------------------------

    async def dry_run(
        self, student_id: str, *, progress: ProgressCallback | None = None
    ) -> DryRunReport:
        """Read and check every apartment's page; write nothing upstream."""
        ctx = await self.services.context(student_id)
        plan = await self._plan(ctx)
        tally = _Tally("dry_run", len(plan.apartments), progress)
        states = await self.repo.page_states(ctx.student_id)
        details: dict[int, ApartmentCheck] = {}
        async with self.services.notes(ctx) as notes:
            await self._attach_pages(notes, plan)
            await tally.report()
            slots = anyio.CapacityLimiter(self.max_concurrent_apartments)
            reads = anyio.CapacityLimiter(self.page_read_concurrency)

            async def check(apartment: _Apartment) -> None:
                async with slots:
                    details[apartment.row.id] = await self._check_apartment(
                        notes, ctx, apartment, states.get(apartment.page_id or ""), reads, tally
                    )
                tally.apartments_done += 1
                await tally.report(apartment.label)

            async with anyio.create_task_group() as group:
                for apartment in plan.apartments:
                    group.start_soon(check, apartment)
        ordered = [details[a.row.id] for a in plan.apartments]
        report = DryRunReport(
            student_id=ctx.student_id,
            apartments=len(ordered),
            unresolved_apartments=sum(not d.resolved for d in ordered),
            incomplete_templates=sum(
                d.error is None and d.template_complete is False for d in ordered
            ),
            failed=sum(d.error is not None for d in ordered),
            active_listings=len(plan.listings),
            unmapped_listings=plan.unmapped_listings,
            details=ordered,
        )
        log.info("knowledge_dry_run", student_id=ctx.student_id, **report.counters())
        return report

    async def _check_apartment(
        self,
        notes: NotesClient,
        ctx: CustomerContext,
        apartment: _Apartment,
        state: PageStateView | None,
        reads: anyio.CapacityLimiter,
        tally: _Tally,
    ) -> ApartmentCheck:
        detail = ApartmentCheck(
            pms_room_type_id=apartment.row.pms_room_type_id,
            name=apartment.row.name,
            listing_id=apartment.row.assistant_listing_id,
            notes_page_id=apartment.page_id,
            resolved=apartment.reason is None,
            unresolved_reason=apartment.reason,
        )
        if apartment.page_id is None:
            detail.template_complete = False
            return detail
        try:
            await self._page_of(notes, apartment)
            if state is not None and self._page_unchanged(state, apartment.page):
                detail.template_complete = state.template_complete
                detail.missing_sections = list(state.missing_sections)
                detail.wifi_found = state.wifi_found
                detail.nodes = len(state.node_hashes)
                return detail
            async with reads:
                read = await self._read_page(notes, ctx, apartment)
            tally.nodes_total += len(read.drafts)
            detail.page_read = True
            detail.template_complete = read.check.complete
            detail.missing_sections = list(read.check.missing)
            detail.wifi_found = read.check.wifi is not None
            detail.nodes = len(read.drafts)
        except Exception as error:
            detail.error = _apartment_error(error)
            _log_failure(ctx, apartment, detail.error, error)
        return detail

    # --- commit --------------------------------------------------------------------------------

    async def commit_as_job(self, student_id: str, *, runner_id: str) -> CommitReport:
        """A commit run outside the job runner (onboarding's step 14), recorded as a job.

        The customer's sync history is the one fact every page reads ("is my knowledge up
        to date?"): a commit that is not in it would leave the console saying "not loaded
        yet" right after onboarding loaded everything.
        """
        job_id = uuid.uuid4().hex
        await self.repo.create_job(job_id, student_id, "commit", runner_id=runner_id)
        await self.repo.start_job(job_id)
        try:
            report = await self.commit(student_id)
        except PmsgateError as error:
            await self.repo.finish_job(job_id, "failed", error_code=error.code, error=error.message)
            raise
        except Exception as error:
            await self.repo.finish_job(
                job_id,
                "failed",
                error_code="internal_error",
                error=f"The commit failed unexpectedly ({type(error).__name__}).",
            )
            raise
        await self.repo.finish_job(
            job_id,
            "succeeded",
            counters=report.counters(),
            report=report.as_dict(),
            progress=(report.apartments, report.apartments),
        )
        return report

    async def commit(
        self, student_id: str, *, progress: ProgressCallback | None = None
    ) -> CommitReport:
        """Write every resolved apartment's nodes under its listing's directory."""
        ctx = await self.services.context(student_id)
        plan = await self._plan(ctx)
        tally = _Tally("commit", len(plan.apartments), progress)
        run_id = uuid.uuid4().hex
        states = await self.repo.page_states(ctx.student_id)
        report = CommitReport(student_id=ctx.student_id, apartments=len(plan.apartments))
        results: dict[int, ApartmentSync] = {}
        async with self.services.notes(ctx) as notes:
            resolved = [a for a in plan.apartments if a.reason is None]
            index = _Index()
            folder: KbNode | None = None
            if resolved:
                await self._attach_pages(notes, plan)
                index = await self._index(plan.workspace_id)
                folder, report.sync_folder_created = await self._folder(
                    plan.workspace_id, index, run_id
                )
            await tally.report()
            slots = anyio.CapacityLimiter(self.max_concurrent_apartments)
            reads = anyio.CapacityLimiter(self.page_read_concurrency)

            async def sync(apartment: _Apartment) -> None:
                if apartment.reason is not None or folder is None:
                    results[apartment.row.id] = self._unresolved(apartment)
                else:
                    async with slots:
                        results[apartment.row.id] = await self._sync_apartment(
                            notes,
                            ctx,
                            plan.workspace_id,
                            apartment,
                            states.get(apartment.page_id or ""),
                            index,
                            folder,
                            run_id,
                            reads,
                            tally,
                        )
                tally.apartments_done += 1
                await tally.report(apartment.label)

            async with anyio.create_task_group() as group:
                for apartment in plan.apartments:
                    group.start_soon(sync, apartment)
        for apartment in plan.apartments:
            detail = results[apartment.row.id]
            report.details.append(detail)
            report.created += detail.created
            report.updated += detail.updated
            report.unchanged += detail.unchanged
            report.deleted += detail.deleted
            report.nodes += detail.nodes
            report.directories_created += int(detail.directory_created)
            if detail.status == "unresolved":
                report.unresolved_apartments += 1
            elif detail.status == "blocked_by_template":
                report.blocked_by_template += 1
            elif detail.status == "failed":
                report.failed += 1
            if detail.wifi_node is not None:
                report.wifi_nodes[detail.pms_room_type_id] = detail.wifi_node
            if detail.error is not None:
                report.errors[detail.pms_room_type_id] = detail.error
        log.info("knowledge_commit", student_id=ctx.student_id, **report.counters())
        return report

    def _unresolved(self, apartment: _Apartment) -> ApartmentSync:
        return ApartmentSync(
            pms_room_type_id=apartment.row.pms_room_type_id,
            name=apartment.row.name,
            listing_id=apartment.row.assistant_listing_id,
            notes_page_id=apartment.page_id,
            status="unresolved",
            unresolved_reason=apartment.reason,
        )

    async def _sync_apartment(
        self,
        notes: NotesClient,
        ctx: CustomerContext,
        workspace_id: str,
        apartment: _Apartment,
        state: PageStateView | None,
        index: _Index,
        folder: KbNode,
        run_id: str,
        reads: anyio.CapacityLimiter,
        tally: _Tally,
    ) -> ApartmentSync:
        assert apartment.listing is not None
        listing = apartment.listing
        detail = ApartmentSync(
            pms_room_type_id=apartment.row.pms_room_type_id,
            name=apartment.row.name,
            listing_id=listing.id,
            notes_page_id=apartment.page_id,
            status="synced",
        )
        page_id = apartment.page_id
        if page_id is None:
            detail.status = "blocked_by_template"
            detail.missing_sections = self.template.section_ids()
            return detail
        existing = index.by_page.get(normalise_id(page_id), [])
        directory = _first(index.directories.get(listing.id, []))
        try:
            await self._page_of(notes, apartment)
            fresh = state is not None and self._page_unchanged(state, apartment.page)
            if fresh and state is not None and not state.template_complete:
                detail.status = "blocked_by_template"
                detail.missing_sections = list(state.missing_sections)
                return detail
            if (
                fresh
                and state is not None
                and state.synced_listing_id == listing.id
                and directory is not None
                and _platform_matches(existing, state.node_hashes, directory.id, listing.id)
            ):
                detail.status = "unchanged"
                detail.nodes = detail.unchanged = len(state.node_hashes)
                detail.wifi_node = state.wifi_found and state.wifi_source_key in state.node_hashes
                tally.nodes_total += detail.nodes
                tally.nodes_done += detail.nodes
                tally.add(unchanged=detail.nodes)
                return detail
            async with reads:
                read = await self._read_page(notes, ctx, apartment)
            detail.page_read = True
            detail.missing_sections = list(read.check.missing)
            if not read.check.complete:
                detail.status = "blocked_by_template"
                return detail
            detail.nodes = len(read.drafts)
            tally.nodes_total += detail.nodes
            if directory is None:
                directory = await self._create_directory(
                    workspace_id, folder, listing, apartment, run_id
                )
                index.directories.setdefault(listing.id, []).append(directory)
                detail.directory_created = True
                tally.add(directoriesCreated=1)
            elif _directory_stale(directory, folder, listing, apartment):
                directory_id = directory.id
                await self._upstream(
                    lambda: self.platform.update_node(
                        directory_id,
                        KbNodeUpdate(
                            title=_directory_title(listing, apartment),
                            parent_id=folder.id,
                            entity_ids=[listing.id],
                        ),
                        workspace_id=workspace_id,
                        idempotency_key=_key(run_id, "directory-update", listing.id),
                    )
                )
            await self._write_nodes(
                workspace_id,
                page_id,
                read.drafts,
                existing,
                directory.id,
                listing.id,
                run_id,
                detail,
                tally,
            )
            detail.wifi_node = read.wifi_ok
            written = detail.created or detail.updated or detail.deleted
            detail.status = "synced" if written or detail.directory_created else "unchanged"
            with _atomic():
                await self.repo.mark_page_synced(
                    ctx.student_id,
                    page_id,
                    listing.id,
                    {d.source_key: d.content_hash for d in read.drafts},
                )
        except Exception as error:
            detail.status = "failed"
            detail.error = _apartment_error(error)
            if detail.wifi_node is None:
                detail.wifi_node = False
            _log_failure(ctx, apartment, detail.error, error)
            # Some nodes may be written: the next run must compare with the platform again.
            with _atomic():
                await self.repo.forget_page_sync(ctx.student_id, page_id)
        return detail

    async def _write_nodes(
        self,
        workspace_id: str,
        page_id: str,
        drafts: list[NodeDraft],
        existing: list[KbNode],
        directory_id: str,
        listing_id: str,
        run_id: str,
        detail: ApartmentSync,
        tally: _Tally,
    ) -> None:
        by_key: dict[str, list[KbNode]] = {}
        for node in existing:
            by_key.setdefault(str(node.metadata.get("source_key")), []).append(node)
        doomed: list[KbNode] = []
        for draft in drafts:
            found = by_key.pop(draft.source_key, [])
            doomed += found[1:]  # never two nodes for one block
            metadata = _node_metadata(page_id, draft)
            if not found:
                await self._create_node(
                    workspace_id, draft, directory_id, listing_id, metadata, run_id
                )
                detail.created += 1
                tally.add(created=1)
            elif _node_current(found[0], draft, directory_id, listing_id):
                detail.unchanged += 1
                tally.add(unchanged=1)
            elif await self._update_node(
                workspace_id, found[0], draft, directory_id, listing_id, metadata, run_id
            ):
                detail.updated += 1
                tally.add(updated=1)
            else:
                # Deleted on the platform since we listed it: write it anew.
                await self._create_node(
                    workspace_id, draft, directory_id, listing_id, metadata, run_id
                )
                detail.created += 1
                tally.add(created=1)
            tally.nodes_done += 1
            await tally.report()
        # Deletions last: the knowledge base never lacks a block's node half-way.
        for nodes in by_key.values():
            doomed += nodes
        for node in doomed:
            if await self._delete_node(workspace_id, node, run_id):
                detail.deleted += 1
                tally.add(deleted=1)

    async def _update_node(
        self,
        workspace_id: str,
        node: KbNode,
        draft: NodeDraft,
        directory_id: str,
        listing_id: str,
        metadata: dict[str, Any],
        run_id: str,
    ) -> bool:
        """Rewrite a node in place; False when it no longer exists."""
        changes = KbNodeUpdate(
            title=draft.title,
            body=draft.body,
            parent_id=directory_id,
            entity_ids=[listing_id],
            metadata=metadata,
        )
        try:
            await self._upstream(
                lambda: self.platform.update_node(
                    node.id,
                    changes,
                    workspace_id=workspace_id,
                    idempotency_key=_key(run_id, "update", node.id, draft.content_hash),
                )
            )
        except PlatformNotFound:
            return False
        return True

    async def _delete_node(self, workspace_id: str, node: KbNode, run_id: str) -> bool:
        """Delete a node; False when it was already gone."""
        try:
            await self._upstream(
                lambda: self.platform.delete_node(
                    node.id,
                    workspace_id=workspace_id,
                    idempotency_key=_key(run_id, "delete", node.id),
                )
            )
        except PlatformNotFound:
            return False
        return True

    async def _create_node(
        self,
        workspace_id: str,
        draft: NodeDraft,
        directory_id: str,
        listing_id: str,
        metadata: dict[str, Any],
        run_id: str,
    ) -> KbNode:
        return await self._upstream(
            lambda: self.platform.create_node(
                workspace_id,
                NewKbNode(
                    title=draft.title,
                    body=draft.body,
                    parent_id=directory_id,
                    entity_ids=[listing_id],
                    metadata=metadata,
                ),
                idempotency_key=_key(run_id, "create", draft.source_key, draft.content_hash),
            )
        )

    async def _create_directory(
        self,
        workspace_id: str,
        folder: KbNode,
        listing: Listing,
        apartment: _Apartment,
        run_id: str,
    ) -> KbNode:
        return await self._upstream(
            lambda: self.platform.create_directory(
                workspace_id,
                _directory_title(listing, apartment),
                parent_id=folder.id,
                entity_ids=[listing.id],
                metadata={
                    "managed_by": MANAGED_BY,
                    "source_key": f"{SOURCE_PREFIX}:listing:{listing.id}",
                    "listing_id": listing.id,
                },
                idempotency_key=_key(run_id, "directory", listing.id),
            )
        )

    async def _folder(self, workspace_id: str, index: _Index, run_id: str) -> tuple[KbNode, bool]:
        found = _first(index.folders)
        if found is not None:
            return found, False
        try:
            folder = await self._upstream(
                lambda: self.platform.create_directory(
                    workspace_id,
                    self.folder_title,
                    metadata={"managed_by": MANAGED_BY, "source_key": SYNC_FOLDER_KEY},
                    idempotency_key=_key(run_id, "folder"),
                )
            )
        except PlatformError as error:
            raise upstream_error(error, "creating the knowledge-sync folder") from None
        index.folders.append(folder)
        return folder, True

    async def _index(self, workspace_id: str) -> _Index:
        try:
            nodes = await self._upstream(lambda: self.platform.list_nodes(workspace_id))
        except PlatformError as error:
            raise upstream_error(error, "reading the knowledge-base nodes") from None
        return _Index.of(nodes)

    # --- shared steps --------------------------------------------------------------------------

    async def _plan(self, ctx: CustomerContext) -> _Plan:
        if ctx.workspace_id is None:
            raise workspace_not_created(ctx.student_id)
        listings: list[Listing] = []
        if ctx.pms_connected:
            workspace_id = ctx.workspace_id
            try:
                listings = await self._upstream(lambda: self.platform.list_listings(workspace_id))
            except PlatformError as error:
                raise upstream_error(error, "reading the listings") from None
        active = {listing.id: listing for listing in listings}
        apartments: list[_Apartment] = []
        for row in ctx.apartments:
            reason: UnresolvedReason | None = None
            if ctx.pms is None:
                reason = "pms_not_linked"
            elif not ctx.pms_connected:
                # Spec §3: no listings while authentication fails, so none can be tied.
                reason = "pms_integration_error"
            elif row.assistant_listing_id is None:
                reason = "no_listing"
            elif row.assistant_listing_id not in active:
                reason = "listing_not_active"
            listing = active.get(row.assistant_listing_id or "") if reason is None else None
            apartments.append(_Apartment(row=row, listing=listing, reason=reason))
        return _Plan(ctx, ctx.workspace_id, listings, apartments)

    async def _attach_pages(self, notes: NotesClient, plan: _Plan) -> None:
        """Each apartment's page as the apartments database lists it (one request per 100)."""
        wanted = {normalise_id(a.page_id): a for a in plan.apartments if a.page_id}
        if not wanted:
            return
        database_id = plan.ctx.apartments_database_id
        if database_id:
            try:
                pages = await self._upstream(lambda: notes.query_database(database_id))
            except NotesError as error:
                raise upstream_error(error, "reading the apartments database") from None
            for page in pages:
                apartment = wanted.get(normalise_id(page.id))
                if apartment is not None and not page.archived:
                    apartment.page = page

    async def _page_of(self, notes: NotesClient, apartment: _Apartment) -> ApartmentPage:
        """The apartment's page properties (its edit time): listed already, else read alone."""
        if apartment.page is None:
            page_id = apartment.page_id
            assert page_id is not None
            # Not in the apartments database: one request for its own properties.
            apartment.page = await self._upstream(lambda: notes.get_page(page_id))
        return apartment.page

    async def _read_page(
        self, notes: NotesClient, ctx: CustomerContext, apartment: _Apartment
    ) -> _Read:
        """Read a page in depth, check it, derive its nodes and store what was seen."""
        assert apartment.page_id is not None
        page_id = apartment.page_id
        started = self.clock.now()
        page = await self._page_of(notes, apartment)
        blocks = await self._upstream(lambda: notes.read_tree(page_id))
        check = check_page(blocks, self.template, page_id=page_id)
        drafts = page_nodes(page_id, blocks, page_title=page.title or apartment.row.name)
        wifi_key: str | None = None
        wifi_ok = False
        section = check.sections.get(WIFI)
        if section is not None:
            wifi_draft = next((d for d in drafts if d.block_id == section.block_id), None)
            if wifi_draft is not None:
                wifi_key = wifi_draft.source_key
                wifi_ok = check.wifi is not None and wifi_draft.contains(
                    check.wifi.network, check.wifi.password.get_secret_value()
                )
        with _atomic():
            await self.repo.save_page_read(
                ctx.student_id,
                page_id,
                page_edited_at=page.last_edited_time,
                read_at=started,
                format_version=FORMAT_VERSION,
                template_complete=check.complete,
                missing_sections=check.missing,
                wifi_found=wifi_ok,
                wifi_source_key=wifi_key,
                node_hashes={d.source_key: d.content_hash for d in drafts},
            )
        return _Read(check=check, drafts=drafts, wifi_key=wifi_key, wifi_ok=wifi_ok)

    def _page_unchanged(self, state: PageStateView, page: ApartmentPage | None) -> bool:
        """Whether the stored read still describes the page (no need to read it in depth)."""
        if page is None or page.last_edited_time is None:
            return False
        if state.format_version != FORMAT_VERSION or state.page_edited_at is None:
            return False
        if state.page_edited_at != page.last_edited_time:
            return False
        # The stamp is rounded down to the minute: an edit later in that minute keeps it, so a
        # read is trusted only if it began once that minute (and the clocks' skew) was over.
        settled = page.last_edited_time + timedelta(seconds=60 + CLOCK_SKEW_S)
        return state.read_at >= settled

    async def _upstream(self, call: Callable[[], Awaitable[T]]) -> T:
        """One upstream call; a 429 or outage that outlasts the client's retries is waited out.

        A rate limit is waited out for as long as ``max_rate_limited_wait_s`` in total (the
        budget is shared with the agent: a storm passes), an outage ``max_upstream_rounds``
        times with a growing pause; then the error stands.
        """
        outages = 0
        limited_s = 0.0
        while True:
            try:
                return await call()
            except (PlatformRateLimited, NotesRateLimited) as error:
                wait = error.retry_after if error.retry_after is not None else 5.0
                limited_s += wait
                if wait > self.max_upstream_wait_s or limited_s > self.max_rate_limited_wait_s:
                    raise
                log.info("knowledge_upstream_wait", code=error.code, wait_s=wait)
                await self._sleep(wait)
            except (PlatformUnavailable, NotesUnavailable, NotesConflict) as error:
                outages += 1
                if outages >= self.max_upstream_rounds:
                    raise
                wait = min(60.0, 2.0**outages)
                log.info("knowledge_upstream_wait", code=error.code, wait_s=wait, round=outages)
                await self._sleep(wait)


# --- helpers -----------------------------------------------------------------------------------


def _atomic() -> anyio.CancelScope:
    """A database write that a cancellation waits for rather than cuts (no half transaction)."""
    return anyio.CancelScope(shield=True)


def _key(run_id: str, operation: str, *parts: str) -> str:
    """An idempotency key: same run, operation and node (and content) → same key."""
    digest = hashlib.sha256("\x1f".join((run_id, operation, *parts)).encode()).hexdigest()
    return f"pmsgate-ks-{operation}-{digest[:40]}"


def _first(nodes: Sequence[KbNode]) -> KbNode | None:
    return nodes[0] if nodes else None


def _node_metadata(page_id: str, draft: NodeDraft) -> dict[str, Any]:
    return {
        "managed_by": MANAGED_BY,
        "source_key": draft.source_key,
        "content_hash": draft.content_hash,
        "notes_page_id": normalise_id(page_id),
        "notes_block_id": draft.block_id,
        "format_version": FORMAT_VERSION,
    }


def _node_current(node: KbNode, draft: NodeDraft, directory_id: str, listing_id: str) -> bool:
    """Whether the platform's node already is what the draft says (content as stored there)."""
    return (
        content_hash(node.title, node.body) == draft.content_hash
        and node.metadata.get("content_hash") == draft.content_hash
        and node.parent_id == directory_id
        and list(node.entity_ids) == [listing_id]
    )


def _platform_matches(
    existing: Sequence[KbNode], hashes: dict[str, str], directory_id: str, listing_id: str
) -> bool:
    """Whether the platform holds exactly one current node per stored hash, and no other."""
    if len(existing) != len(hashes):
        return False
    for node in existing:
        expected = hashes.get(str(node.metadata.get("source_key")))
        if (
            expected is None
            or content_hash(node.title, node.body) != expected
            or node.metadata.get("content_hash") != expected
            or node.parent_id != directory_id
            or list(node.entity_ids) != [listing_id]
        ):
            return False
    # Equal counts and every node matched a distinct key: no duplicates, none missing.
    return len({str(n.metadata.get("source_key")) for n in existing}) == len(hashes)


def _directory_title(listing: Listing, apartment: _Apartment) -> str:
    return (listing.name or apartment.row.name or f"Listing {listing.id}").strip()[:255]


def _directory_stale(
    directory: KbNode, folder: KbNode, listing: Listing, apartment: _Apartment
) -> bool:
    return (
        directory.title != _directory_title(listing, apartment)
        or directory.parent_id != folder.id
        or list(directory.entity_ids) != [listing.id]
    )


def _apartment_error(error: Exception) -> ApartmentError:
    if isinstance(error, NotesError | PlatformError | PmsgateError):
        return ApartmentError(code=error.code, message=error.message)
    # Not ours to word: its text may hold anything, so only its type is reported.
    return ApartmentError(
        code="internal_error", message=f"The apartment's sync failed ({type(error).__name__})."
    )


def _log_failure(
    ctx: CustomerContext, apartment: _Apartment, reported: ApartmentError, error: Exception
) -> None:
    known = isinstance(error, NotesError | PlatformError | PmsgateError)
    (log.warning if known else log.exception)(
        "knowledge_apartment_failed",
        student_id=ctx.student_id,
        room_type=apartment.row.pms_room_type_id,
        code=reported.code,
    )
