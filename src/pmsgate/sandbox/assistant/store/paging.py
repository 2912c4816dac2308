"""Keyset pagination of the emulator's lists: ``limit`` 1-100 (default 20) and an opaque cursor."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.errors import AssistantApiError

PAGE_DEFAULT = 20
PAGE_MAX = 100


class _Sequenced(Protocol):
    @property
    def seq(self) -> int: ...


T = TypeVar("T", bound=_Sequenced)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list and the cursor of the next one."""

    items: list[T]
    next_cursor: str | None
    has_more: bool


def paginate(items: Sequence[T], limit: int | None, cursor: str | None) -> Page[T]:
    """One page of ``items`` (in ``seq`` order) after ``cursor``; limit 1-100, default 20."""
    size = PAGE_DEFAULT if limit is None else limit
    if not 1 <= size <= PAGE_MAX:
        raise AssistantApiError(errors.BAD_REQUEST, f"limit must be between 1 and {PAGE_MAX}")
    after = _decode_cursor(cursor) if cursor else -1
    # Keyset on seq: a deletion or insertion between pages never repeats or skips an item.
    remaining = [item for item in sorted(items, key=lambda i: i.seq) if item.seq > after]
    page = remaining[:size]
    has_more = len(remaining) > size
    next_cursor = _encode_cursor(page[-1].seq) if has_more and page else None
    return Page(page, next_cursor, has_more)


def _encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"after:{seq}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, value = raw.partition(":")
        if prefix != "after":
            raise ValueError(prefix)
        return int(value)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise AssistantApiError(errors.BAD_REQUEST, "invalid cursor") from None
