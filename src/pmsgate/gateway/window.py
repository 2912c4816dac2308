"""Reading a facility's reservation window: paged, bounded, and defensive.

``reservations/get-list`` is paged with ``limit``/``offset``, but a server may ignore
``offset`` (every page is the first), omit ``total_count``, cap the page length
silently, or ignore every date filter and page the facility's whole history
(docs/requirements.md R8.1, docs/kross-api.md). One refresh must never spend the facility's minute
(10 requests) on that: paging stops

- when a page is empty, shorter than the page length actually applied, or the rows
  reach ``total_count`` (complete);
- when a page repeats one already read, or the answer's ``offset`` is not the one
  asked for (the server ignores ``offset``);
- before a page that would take the permits spent by this refresh (token and retries
  included, measured on the limiter) past ``budget_share`` of the per-minute limit, or
  past ``max_pages``;
- when a later page fails (no permit, upstream trouble): the pages already read are
  kept.

A window cut short is still an answer: it is cached and served with
``meta.truncated = true`` and the reason, rather than failing every call with 429.

Except for a refresh ahead of need (background priority, ``whole``): it may spend only
the background share of the budget and yields to waiting guests
(:mod:`pmsgate.gateway.limiter`), so a window it cannot read whole for the budget or the
upstream is no answer: the error is raised, the refresh fails quietly and the answer
already cached stays (a truncated one must not replace it).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from pmsgate.config import Settings
from pmsgate.errors import PmsgateError
from pmsgate.gateway.limiter import BudgetExhausted, Priority
from pmsgate.gateway.service import STALE_ON
from pmsgate.integrations.kross.client import KrossResult
from pmsgate.integrations.kross.errors import UnexpectedResponse

log = structlog.get_logger(__name__)

DEFAULT_PAGE_SIZE = 100
TruncatedReason = Literal[
    "budget_share", "page_limit", "offset_ignored", "page_repeated", "budget_exhausted", "upstream"
]


@dataclass(frozen=True)
class WindowPolicy:
    """How much of the facility's reservations one refresh reads (settings ``window_*``)."""

    days_back: int = 30
    days_ahead: int = 365
    # Bound on the booking (creation) date, the only date filter public clients send.
    booked_days: int = 400
    max_pages: int = 20
    budget_share: float = 0.5

    @classmethod
    def from_settings(cls, settings: Settings) -> WindowPolicy:
        """The policy of PMSGATE_WINDOW_* settings."""
        return cls(
            booked_days=settings.window_booked_days,
            max_pages=settings.window_max_pages,
            budget_share=settings.window_budget_share,
        )

    def page_cap(self, per_minute: int) -> int:
        """Most permits one refresh may take: the share of the minute, at least one page."""
        # The epsilon keeps e.g. 10 * 0.3 = 2.9999… from losing a page.
        share = math.floor(per_minute * self.budget_share + 1e-9)
        return max(1, min(self.max_pages, share))


@dataclass
class Pages:
    """What paging collected: the rows (with the ruid of their page) and why it stopped."""

    rows: list[tuple[str | None, Any]] = field(default_factory=list)
    pages: int = 0
    total_count: int | None = None
    truncated: bool = False
    reason: TruncatedReason | None = None

    def stop(self, reason: TruncatedReason, *, more: bool = True) -> None:
        """Stop paging; truncated when more rows were (or may have been) left unread."""
        self.truncated = more
        self.reason = reason if more else None


def _row_id(row: Any) -> Any:
    return row.get("id_reservation") if isinstance(row, dict) else None


async def read_pages(
    read_page: Callable[[int, int], Awaitable[KrossResult]],
    *,
    page_size: int,
    max_pages: int,
    permit_cap: int,
    spent: Callable[[], Awaitable[int]],
    whole: bool = False,
) -> Pages:
    """Read pages of a list until complete or a stop rule fires (module docstring).

    ``whole`` (a background refresh): a stop for the budget or the upstream raises instead.
    """
    pages = Pages()
    seen_pages: set[tuple[Any, ...]] = set()
    seen_ids: set[Any] = set()
    offset = 0
    while True:
        if pages.pages:
            if pages.pages >= max_pages:
                pages.stop("page_limit")
                break
            if await spent() + 1 > permit_cap:
                if whole:
                    raise BudgetExhausted(
                        retry_after_s=60.0, window="minute", priority=Priority.BACKGROUND
                    )
                pages.stop("budget_share")
                break
        try:
            result = await read_page(offset, page_size)
        except STALE_ON as error:
            if not pages.pages or whole:
                raise
            exhausted = isinstance(error, BudgetExhausted)
            pages.stop("budget_exhausted" if exhausted else "upstream")
            log.info("window_page_failed", page=pages.pages + 1, error=type(error).__name__)
            break
        except PmsgateError:
            if not pages.pages or whole:
                raise
            pages.stop("upstream")
            break
        pages.pages += 1
        data = result.data if result.data is not None else []
        if not isinstance(data, list):
            raise UnexpectedResponse(
                f"Expected a list of reservations, got {type(data).__name__}.",
                operation=result.operation,
                ruid=result.ruid,
            )
        if result.total_count is not None:
            pages.total_count = result.total_count
        applied = result.limit if result.limit and result.limit > 0 else page_size
        page_full = len(data) >= applied
        more = _more_expected(pages, len(pages.rows), page_full)
        if not data:
            break
        ids = tuple(_row_id(row) for row in data)
        if result.offset is not None and result.offset != offset:
            # The server answered another offset than the one asked: it ignores offset.
            _keep_new(pages, result, data, seen_ids)
            pages.stop("offset_ignored", more=_more_expected(pages, len(pages.rows), page_full))
            break
        if ids in seen_pages:
            pages.stop("page_repeated", more=more)
            break
        seen_pages.add(ids)
        fresh = _keep_new(pages, result, data, seen_ids)
        offset += len(data)
        if pages.total_count is not None:
            if len(pages.rows) >= pages.total_count or offset >= pages.total_count:
                break
        elif not page_full:
            break
        if not fresh:
            # Rows already read, in another order: paging does not move forward.
            pages.stop("page_repeated", more=_more_expected(pages, len(pages.rows), page_full))
            break
    return pages


def _keep_new(pages: Pages, result: KrossResult, data: list[Any], seen_ids: set[Any]) -> int:
    fresh = 0
    for row in data:
        row_id = _row_id(row)
        if row_id is not None and row_id in seen_ids:
            continue
        if row_id is not None:
            seen_ids.add(row_id)
        pages.rows.append((result.ruid, row))
        fresh += 1
    return fresh


def _more_expected(pages: Pages, have: int, page_full: bool) -> bool:
    if pages.total_count is not None:
        return have < pages.total_count
    return page_full
