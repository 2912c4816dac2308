"""What a knowledge sync reports: per apartment and in total, and its progress as it runs.

The reports speak the camelCase of docs/requirements.md R17.1 on the wire
(:meth:`as_dict`); :class:`Tally` counts a running sync and hands each step to the
caller's :data:`ProgressCallback` as a :class:`SyncProgress`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

SyncKind = Literal["dry_run", "commit"]
ApartmentStatus = Literal["synced", "unchanged", "blocked_by_template", "unresolved", "failed"]
UnresolvedReason = Literal[
    "pms_not_linked", "pms_integration_error", "no_listing", "listing_not_active"
]


class _Camel(BaseModel):
    """Reports speak the camelCase of docs/requirements.md R17.1 on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view with the counters' names (docs/requirements.md R17.1)."""
        return self.model_dump(mode="json", by_alias=True)

    def _counted(self, *fields: str) -> dict[str, int]:
        """These counters by their wire names (``unresolvedApartments``), in this order."""
        return {to_camel(name): getattr(self, name) for name in fields}


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
    """The dry run's counters (docs/requirements.md R17.1) and what stands behind them."""

    student_id: str
    apartments: int
    unresolved_apartments: int
    incomplete_templates: int
    failed: int = 0
    active_listings: int = 0
    unmapped_listings: list[str] = Field(default_factory=list)
    details: list[ApartmentCheck] = Field(default_factory=list)

    def counters(self) -> dict[str, int]:
        """The dry-run counters of docs/requirements.md R17.1."""
        return self._counted(
            "apartments", "unresolved_apartments", "incomplete_templates", "failed"
        )


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
    """The commit's counters (docs/requirements.md R17.1) and what stands behind them."""

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
        """The commit counters of docs/requirements.md R17.1, with updated/unchanged/deleted."""
        return self._counted(
            "apartments",
            "unresolved_apartments",
            "created",
            "updated",
            "unchanged",
            "deleted",
            "failed",
            "blocked_by_template",
            "directories_created",
        )


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


# What a running sync's progress says of where it is, as the tally counts it.
_WHERE = ("kind", "apartments_total", "apartments_done", "nodes_total", "nodes_done")


class Tally:
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
        where = {name: getattr(self, name) for name in _WHERE}
        event = SyncProgress(apartment=apartment, counters=dict(self.counters), **where)
        outcome = self._callback(event)
        if inspect.isawaitable(outcome):
            await outcome
