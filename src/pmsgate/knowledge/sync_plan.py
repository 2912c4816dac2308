"""What a knowledge sync works from, and how it tells what is already current.

The apartments resolved to their active listings (or why not: :func:`resolve_apartments`),
the platform's nodes this sync manages indexed by what they stand for
(:class:`NodeIndex`), and the comparisons that decide what needs writing: a page whose
stored read still holds (:func:`page_unchanged`), a node already as drafted
(:func:`node_current`), a platform that holds exactly the stored nodes
(:func:`assistant_matches`), a listing directory to rename or move (:func:`directory_stale`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from pmsgate.customers.context import CustomerContext
from pmsgate.integrations.assistant.client import KbNode, Listing
from pmsgate.integrations.notion.models import ApartmentPage
from pmsgate.knowledge.nodes import (
    FORMAT_VERSION,
    SOURCE_PREFIX,
    NodeDraft,
    content_hash,
    normalise_id,
)
from pmsgate.knowledge.sync_reports import UnresolvedReason
from pmsgate.knowledge.template import PageCheck
from pmsgate.storage.apartments import ApartmentView
from pmsgate.storage.knowledge import PageStateView

SYNC_FOLDER_TITLE = "Knowledge sync"
SYNC_FOLDER_KEY = f"{SOURCE_PREFIX}:sync-folder"
# Extra seconds on top of the minute the notes API rounds to, for the clocks' disagreement.
CLOCK_SKEW_S = 5.0


@dataclass
class SyncApartment:
    """One registry row: its active listing or why it has none, and its page once listed."""

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
class SyncPlan:
    """What one run works on: the customer's workspace, active listings and apartments."""

    ctx: CustomerContext
    workspace_id: str
    listings: list[Listing]
    apartments: list[SyncApartment]

    @property
    def unmapped_listings(self) -> list[str]:
        mapped = {a.row.assistant_listing_id for a in self.apartments}
        return [listing.id for listing in self.listings if listing.id not in mapped]


@dataclass
class PageRead:
    """A page read in depth: its check and its nodes."""

    check: PageCheck
    drafts: list[NodeDraft]
    wifi_key: str | None
    wifi_ok: bool


@dataclass
class NodeIndex:
    """The workspace's nodes that this sync manages, by what they stand for."""

    folders: list[KbNode] = field(default_factory=list)
    directories: dict[str, list[KbNode]] = field(default_factory=dict)
    by_page: dict[str, list[KbNode]] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Sequence[KbNode]) -> NodeIndex:
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


def resolve_apartments(ctx: CustomerContext, listings: list[Listing]) -> list[SyncApartment]:
    """Each registry row with its active listing, or the reason it has none."""
    active = {listing.id: listing for listing in listings}
    apartments: list[SyncApartment] = []
    for row in ctx.apartments:
        reason: UnresolvedReason | None = None
        if ctx.kross is None:
            reason = "pms_not_linked"
        elif not ctx.kross_connected:
            # docs/requirements.md R11.3: no listings while authentication fails, none tied.
            reason = "pms_integration_error"
        elif row.assistant_listing_id is None:
            reason = "no_listing"
        elif row.assistant_listing_id not in active:
            reason = "listing_not_active"
        listing = active.get(row.assistant_listing_id or "") if reason is None else None
        apartments.append(SyncApartment(row=row, listing=listing, reason=reason))
    return apartments


def page_unchanged(state: PageStateView, page: ApartmentPage | None) -> bool:
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


def first_node(nodes: Sequence[KbNode]) -> KbNode | None:
    return nodes[0] if nodes else None


def node_current(node: KbNode, draft: NodeDraft, directory_id: str, listing_id: str) -> bool:
    """Whether the platform's node already is what the draft says (content as stored there)."""
    return (
        content_hash(node.title, node.body) == draft.content_hash
        and node.metadata.get("content_hash") == draft.content_hash
        and node.parent_id == directory_id
        and list(node.entity_ids) == [listing_id]
    )


def assistant_matches(
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


def directory_title(listing: Listing, apartment: SyncApartment) -> str:
    return (listing.name or apartment.row.name or f"Listing {listing.id}").strip()[:255]


def directory_stale(
    directory: KbNode, folder: KbNode, listing: Listing, apartment: SyncApartment
) -> bool:
    return (
        directory.title != directory_title(listing, apartment)
        or directory.parent_id != folder.id
        or list(directory.entity_ids) != [listing.id]
    )
