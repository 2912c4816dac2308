"""The knowledge sync (docs/requirements.md R17): apartments' notes pages → KB nodes per listing.

**Dry run** (``commit=false``) reads and checks, writes nothing upstream:
``apartments`` (the customer's registry rows), ``unresolvedApartments`` (rows that
cannot be tied to an active listing — all of them while the booking-system
integration is in ``error``, docs/requirements.md R17.5), ``incompleteTemplates`` (pages failing the
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

This module runs the sync; what it works from and compares is in
:mod:`~pmsgate.knowledge.sync_plan`, what it writes on the platform in
:mod:`~pmsgate.knowledge.sync_writes`, how it waits upstream out in
:mod:`~pmsgate.knowledge.sync_upstream`, and what it reports in
:mod:`~pmsgate.knowledge.sync_reports`.
"""

from __future__ import annotations

import uuid

import anyio
import structlog

from pmsgate.catalogue import KnowledgeTemplate, load_catalogue
from pmsgate.clock import Clock, Sleep
from pmsgate.customers.context import CustomerContext, CustomerServices
from pmsgate.customers.service import upstream_error, workspace_not_created
from pmsgate.errors import PmsgateError
from pmsgate.integrations.assistant.client import AssistantClient, KbNode, Listing
from pmsgate.integrations.assistant.errors import AssistantError
from pmsgate.integrations.notion.client import NotionClient
from pmsgate.integrations.notion.errors import NotionError
from pmsgate.integrations.notion.models import ApartmentPage
from pmsgate.knowledge.nodes import FORMAT_VERSION, normalise_id, page_nodes
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync_plan import (
    SYNC_FOLDER_TITLE,
    NodeIndex,
    PageRead,
    SyncApartment,
    SyncPlan,
    assistant_matches,
    first_node,
    page_unchanged,
    resolve_apartments,
)
from pmsgate.knowledge.sync_reports import (
    ApartmentCheck,
    ApartmentError,
    ApartmentSync,
    CommitReport,
    DryRunReport,
    ProgressCallback,
    SyncKind,
    Tally,
)
from pmsgate.knowledge.sync_upstream import UpstreamPatience
from pmsgate.knowledge.sync_writes import NodeWriter
from pmsgate.knowledge.template import WIFI, check_page
from pmsgate.storage.knowledge import PageStateView

log = structlog.get_logger(__name__)


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
        self._template = template
        self.max_concurrent_apartments = max_concurrent_apartments
        self.page_read_concurrency = page_read_concurrency
        self._patience = UpstreamPatience(
            sleep or services.sleep,
            max_upstream_rounds=max_upstream_rounds,
            max_upstream_wait_s=max_upstream_wait_s,
            max_rate_limited_wait_s=max_rate_limited_wait_s,
        )
        self._writer = NodeWriter(
            lambda: services.assistant, self._patience, folder_title=folder_title
        )

    @property
    def template(self) -> KnowledgeTemplate:
        """The knowledge template pages are checked against (the catalogue's by default)."""
        if self._template is None:
            self._template = load_catalogue().knowledge
        return self._template

    @property
    def assistant(self) -> AssistantClient:
        """The assistant-platform client."""
        return self.services.assistant

    async def run(
        self, student_id: str, *, commit: bool, progress: ProgressCallback | None = None
    ) -> DryRunReport | CommitReport:
        """A dry run or a commit, as the web endpoint's ``{commit}`` says."""
        if commit:
            return await self.commit(student_id, progress=progress)
        return await self.dry_run(student_id, progress=progress)

    async def _begin(
        self, student_id: str, kind: SyncKind, progress: ProgressCallback | None
    ) -> tuple[CustomerContext, SyncPlan, Tally, dict[str, PageStateView]]:
        """What a dry run and a commit start from: the customer, the plan, its tally and the
        stored page states."""
        ctx = await self.services.context(student_id)
        plan = await self._plan(ctx)
        tally = Tally(kind, len(plan.apartments), progress)
        return ctx, plan, tally, await self.repo.page_states(ctx.student_id)

    # --- dry run -------------------------------------------------------------------------------

    async def dry_run(
        self, student_id: str, *, progress: ProgressCallback | None = None
    ) -> DryRunReport:
        """Read and check every apartment's page; write nothing upstream."""
        ctx, plan, tally, states = await self._begin(student_id, "dry_run", progress)
        details: dict[int, ApartmentCheck] = {}
        async with self.services.notion(ctx) as notes:
            await self._attach_pages(notes, plan)
            await tally.report()
            slots = anyio.CapacityLimiter(self.max_concurrent_apartments)
            reads = anyio.CapacityLimiter(self.page_read_concurrency)

            async def check(apartment: SyncApartment) -> None:
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
        notes: NotionClient,
        ctx: CustomerContext,
        apartment: SyncApartment,
        state: PageStateView | None,
        reads: anyio.CapacityLimiter,
        tally: Tally,
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
            if state is not None and page_unchanged(state, apartment.page):
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
        ctx, plan, tally, states = await self._begin(student_id, "commit", progress)
        run_id = uuid.uuid4().hex
        report = CommitReport(student_id=ctx.student_id, apartments=len(plan.apartments))
        results: dict[int, ApartmentSync] = {}
        async with self.services.notion(ctx) as notes:
            resolved = [a for a in plan.apartments if a.reason is None]
            index = NodeIndex()
            folder: KbNode | None = None
            if resolved:
                await self._attach_pages(notes, plan)
                index = await self._writer.read_index(plan.workspace_id)
                folder, report.sync_folder_created = await self._writer.sync_folder(
                    plan.workspace_id, index, run_id
                )
            await tally.report()
            slots = anyio.CapacityLimiter(self.max_concurrent_apartments)
            reads = anyio.CapacityLimiter(self.page_read_concurrency)

            async def sync(apartment: SyncApartment) -> None:
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

    def _unresolved(self, apartment: SyncApartment) -> ApartmentSync:
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
        notes: NotionClient,
        ctx: CustomerContext,
        workspace_id: str,
        apartment: SyncApartment,
        state: PageStateView | None,
        index: NodeIndex,
        folder: KbNode,
        run_id: str,
        reads: anyio.CapacityLimiter,
        tally: Tally,
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
        directory = first_node(index.directories.get(listing.id, []))
        try:
            await self._page_of(notes, apartment)
            fresh = state is not None and page_unchanged(state, apartment.page)
            if fresh and state is not None and not state.template_complete:
                detail.status = "blocked_by_template"
                detail.missing_sections = list(state.missing_sections)
                return detail
            if (
                fresh
                and state is not None
                and state.synced_listing_id == listing.id
                and directory is not None
                and assistant_matches(existing, state.node_hashes, directory.id, listing.id)
            ):
                return _unchanged(detail, state, tally)
            async with reads:
                read = await self._read_page(notes, ctx, apartment)
            detail.page_read = True
            detail.missing_sections = list(read.check.missing)
            if not read.check.complete:
                detail.status = "blocked_by_template"
                return detail
            detail.nodes = len(read.drafts)
            tally.nodes_total += detail.nodes
            directory = await self._writer.listing_directory(
                workspace_id, folder, apartment, directory, index, run_id, detail, tally
            )
            await self._writer.write_nodes(
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

    async def _plan(self, ctx: CustomerContext) -> SyncPlan:
        if ctx.workspace_id is None:
            raise workspace_not_created(ctx.student_id)
        listings: list[Listing] = []
        if ctx.kross_connected:
            workspace_id = ctx.workspace_id
            try:
                listings = await self._patience.call(
                    lambda: self.assistant.list_listings(workspace_id)
                )
            except AssistantError as error:
                raise upstream_error(error, "reading the listings") from None
        return SyncPlan(ctx, ctx.workspace_id, listings, resolve_apartments(ctx, listings))

    async def _attach_pages(self, notes: NotionClient, plan: SyncPlan) -> None:
        """Each apartment's page as the apartments database lists it (one request per 100)."""
        wanted = {normalise_id(a.page_id): a for a in plan.apartments if a.page_id}
        if not wanted:
            return
        database_id = plan.ctx.apartments_database_id
        if database_id:
            try:
                pages = await self._patience.call(lambda: notes.query_database(database_id))
            except NotionError as error:
                raise upstream_error(error, "reading the apartments database") from None
            for page in pages:
                apartment = wanted.get(normalise_id(page.id))
                if apartment is not None and not page.archived:
                    apartment.page = page

    async def _page_of(self, notes: NotionClient, apartment: SyncApartment) -> ApartmentPage:
        """The apartment's page properties (its edit time): listed already, else read alone."""
        if apartment.page is None:
            page_id = apartment.page_id
            assert page_id is not None
            # Not in the apartments database: one request for its own properties.
            apartment.page = await self._patience.call(lambda: notes.get_page(page_id))
        return apartment.page

    async def _read_page(
        self, notes: NotionClient, ctx: CustomerContext, apartment: SyncApartment
    ) -> PageRead:
        """Read a page in depth, check it, derive its nodes and store what was seen."""
        assert apartment.page_id is not None
        page_id = apartment.page_id
        started = self.clock.now()
        page = await self._page_of(notes, apartment)
        blocks = await self._patience.call(lambda: notes.read_tree(page_id))
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
        return PageRead(check=check, drafts=drafts, wifi_key=wifi_key, wifi_ok=wifi_ok)


def _atomic() -> anyio.CancelScope:
    """A database write that a cancellation waits for rather than cuts (no half transaction)."""
    return anyio.CancelScope(shield=True)


def _unchanged(detail: ApartmentSync, state: PageStateView, tally: Tally) -> ApartmentSync:
    """An apartment whose page and platform nodes are as last synced: nothing to write."""
    detail.status = "unchanged"
    detail.nodes = detail.unchanged = len(state.node_hashes)
    detail.wifi_node = state.wifi_found and state.wifi_source_key in state.node_hashes
    tally.nodes_total += detail.nodes
    tally.nodes_done += detail.nodes
    tally.add(unchanged=detail.nodes)
    return detail


def _apartment_error(error: Exception) -> ApartmentError:
    if isinstance(error, NotionError | AssistantError | PmsgateError):
        return ApartmentError(code=error.code, message=error.message)
    # Not ours to word: its text may hold anything, so only its type is reported.
    return ApartmentError(
        code="internal_error", message=f"The apartment's sync failed ({type(error).__name__})."
    )


def _log_failure(
    ctx: CustomerContext, apartment: SyncApartment, reported: ApartmentError, error: Exception
) -> None:
    known = isinstance(error, NotionError | AssistantError | PmsgateError)
    (log.warning if known else log.exception)(
        "knowledge_apartment_failed",
        student_id=ctx.student_id,
        room_type=apartment.row.pms_room_type_id,
        code=reported.code,
    )
