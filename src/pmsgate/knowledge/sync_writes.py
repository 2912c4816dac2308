"""What a knowledge commit writes on the assistant platform: the folder, directories, nodes.

Every write carries an idempotency key derived from the run, the operation and the
node (and its content hash), so a client's retry never duplicates it while a later
run never gets a stale replay of an earlier one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from pmsgate.customers.service import upstream_error
from pmsgate.integrations.assistant.client import (
    AssistantClient,
    KbNode,
    KbNodeUpdate,
    Listing,
    NewKbNode,
)
from pmsgate.integrations.assistant.errors import AssistantError, AssistantNotFound
from pmsgate.knowledge.nodes import FORMAT_VERSION, SOURCE_PREFIX, NodeDraft, normalise_id
from pmsgate.knowledge.sync_plan import (
    SYNC_FOLDER_KEY,
    NodeIndex,
    SyncApartment,
    directory_stale,
    directory_title,
    first_node,
    node_current,
)
from pmsgate.knowledge.sync_reports import ApartmentSync, Tally
from pmsgate.knowledge.sync_upstream import UpstreamPatience

MANAGED_BY = "pmsgate-knowledge-sync"


@dataclass(frozen=True)
class NodeWriter:
    """The platform's side of a commit, each call waited out through :class:`UpstreamPatience`.

    ``platform`` gives the assistant-platform client, read when used (it may not be
    configured).
    """

    platform: Callable[[], AssistantClient]
    patience: UpstreamPatience
    _: KW_ONLY
    folder_title: str

    @property
    def assistant(self) -> AssistantClient:
        """The assistant-platform client (read when used: it may not be configured)."""
        return self.platform()

    async def listing_directory(
        self,
        workspace_id: str,
        folder: KbNode,
        apartment: SyncApartment,
        directory: KbNode | None,
        index: NodeIndex,
        run_id: str,
        detail: ApartmentSync,
        tally: Tally,
    ) -> KbNode:
        """The listing's directory node: created when missing, moved or renamed when stale."""
        listing = apartment.listing
        assert listing is not None
        if directory is None:
            directory = await self._create_directory(
                workspace_id, folder, listing, apartment, run_id
            )
            index.directories.setdefault(listing.id, []).append(directory)
            detail.directory_created = True
            tally.add(directoriesCreated=1)
        elif directory_stale(directory, folder, listing, apartment):
            directory_id = directory.id
            await self.patience.call(
                lambda: self.assistant.update_node(
                    directory_id,
                    KbNodeUpdate(
                        title=directory_title(listing, apartment),
                        parent_id=folder.id,
                        entity_ids=[listing.id],
                    ),
                    workspace_id=workspace_id,
                    idempotency_key=idempotency_key(run_id, "directory-update", listing.id),
                )
            )
        return directory

    async def write_nodes(
        self,
        workspace_id: str,
        page_id: str,
        drafts: list[NodeDraft],
        existing: list[KbNode],
        directory_id: str,
        listing_id: str,
        run_id: str,
        detail: ApartmentSync,
        tally: Tally,
    ) -> None:
        by_key: dict[str, list[KbNode]] = {}
        for node in existing:
            by_key.setdefault(str(node.metadata.get("source_key")), []).append(node)
        doomed: list[KbNode] = []
        for draft in drafts:
            found = by_key.pop(draft.source_key, [])
            doomed += found[1:]  # never two nodes for one block
            metadata = node_metadata(page_id, draft)
            if not found:
                await self._create_node(
                    workspace_id, draft, directory_id, listing_id, metadata, run_id
                )
                detail.created += 1
                tally.add(created=1)
            elif node_current(found[0], draft, directory_id, listing_id):
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
            await self.patience.call(
                lambda: self.assistant.update_node(
                    node.id,
                    changes,
                    workspace_id=workspace_id,
                    idempotency_key=idempotency_key(run_id, "update", node.id, draft.content_hash),
                )
            )
        except AssistantNotFound:
            return False
        return True

    async def _delete_node(self, workspace_id: str, node: KbNode, run_id: str) -> bool:
        """Delete a node; False when it was already gone."""
        try:
            await self.patience.call(
                lambda: self.assistant.delete_node(
                    node.id,
                    workspace_id=workspace_id,
                    idempotency_key=idempotency_key(run_id, "delete", node.id),
                )
            )
        except AssistantNotFound:
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
        return await self.patience.call(
            lambda: self.assistant.create_node(
                workspace_id,
                NewKbNode(
                    title=draft.title,
                    body=draft.body,
                    parent_id=directory_id,
                    entity_ids=[listing_id],
                    metadata=metadata,
                ),
                idempotency_key=idempotency_key(
                    run_id, "create", draft.source_key, draft.content_hash
                ),
            )
        )

    async def _create_directory(
        self,
        workspace_id: str,
        folder: KbNode,
        listing: Listing,
        apartment: SyncApartment,
        run_id: str,
    ) -> KbNode:
        return await self.patience.call(
            lambda: self.assistant.create_directory(
                workspace_id,
                directory_title(listing, apartment),
                parent_id=folder.id,
                entity_ids=[listing.id],
                metadata={
                    "managed_by": MANAGED_BY,
                    "source_key": f"{SOURCE_PREFIX}:listing:{listing.id}",
                    "listing_id": listing.id,
                },
                idempotency_key=idempotency_key(run_id, "directory", listing.id),
            )
        )

    async def sync_folder(
        self, workspace_id: str, index: NodeIndex, run_id: str
    ) -> tuple[KbNode, bool]:
        found = first_node(index.folders)
        if found is not None:
            return found, False
        try:
            folder = await self.patience.call(
                lambda: self.assistant.create_directory(
                    workspace_id,
                    self.folder_title,
                    metadata={"managed_by": MANAGED_BY, "source_key": SYNC_FOLDER_KEY},
                    idempotency_key=idempotency_key(run_id, "folder"),
                )
            )
        except AssistantError as error:
            raise upstream_error(error, "creating the knowledge-sync folder") from None
        index.folders.append(folder)
        return folder, True

    async def read_index(self, workspace_id: str) -> NodeIndex:
        try:
            nodes = await self.patience.call(lambda: self.assistant.list_nodes(workspace_id))
        except AssistantError as error:
            raise upstream_error(error, "reading the knowledge-base nodes") from None
        return NodeIndex.of(nodes)


def idempotency_key(run_id: str, operation: str, *parts: str) -> str:
    """An idempotency key: same run, operation and node (and content) → same key."""
    digest = hashlib.sha256("\x1f".join((run_id, operation, *parts)).encode()).hexdigest()
    return f"pmsgate-ks-{operation}-{digest[:40]}"


def node_metadata(page_id: str, draft: NodeDraft) -> dict[str, Any]:
    return {
        "managed_by": MANAGED_BY,
        "source_key": draft.source_key,
        "content_hash": draft.content_hash,
        "notes_page_id": normalise_id(page_id),
        "notes_block_id": draft.block_id,
        "format_version": FORMAT_VERSION,
    }
