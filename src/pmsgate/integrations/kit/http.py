"""Small HTTP facts every client needs once: Retry-After, the deadline, scrubbing, not-sent.

- :func:`parse_retry_after` reads both forms RFC 9110 allows (delta seconds and an
  HTTP date), never answers a negative or infinite wait, and ignores garbage.
- :func:`deadline` bounds a whole request. httpx's own timeouts are per phase and do
  not apply to in-process transports (``httpx.ASGITransport``), so the outer deadline
  is what actually bounds a request, with a small margin so httpx's own timeout, more
  precise about *which* phase failed, fires first when it can.
- :class:`Scrubber` removes our own secret values from upstream text and cuts it short;
  an upstream that echoes a password back never gets it into a log or a message.
- :data:`NOT_SENT`: transport failures that happen before a byte of the request leaves
  this process, so repeating even a write is safe.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import anyio
import httpx

NOT_SENT: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.LocalProtocolError,
    httpx.ProxyError,
    httpx.UnsupportedProtocol,
)

REDACTED = "***"


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value (seconds or HTTP date), or None."""
    if value is None:
        return None
    raw = value.strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def deadline_for(timeout_s: float) -> float:
    """The outer bound of one request that httpx's own ``timeout_s`` should normally beat."""
    return timeout_s + min(1.0, timeout_s * 0.1)


@contextmanager
def deadline(timeout_s: float) -> Iterator[None]:
    """Bound one whole request (connect, send, wait, read) by ``timeout_s`` plus a margin.

    Raises ``TimeoutError`` when it expires; the caller decides whether that means
    "unavailable" (nothing could have changed) or "outcome unknown" (a write was sent).
    """
    with anyio.fail_after(deadline_for(timeout_s)):
        yield


class Scrubber:
    """Removes known secret values from upstream text and cuts it to ``limit`` characters."""

    def __init__(self, secrets: Iterable[str | None] = (), *, limit: int = 300) -> None:
        # Longest first, so a secret that contains another is removed whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self.limit = limit

    def with_secrets(self, *secrets: str | None) -> Scrubber:
        """A scrubber that also removes ``secrets``."""
        return Scrubber([*self._secrets, *secrets], limit=self.limit)

    def __call__(self, text: object) -> str | None:
        """The text without secrets and cut short; None for anything that is not text."""
        if not isinstance(text, str) or not text:
            return None
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        if len(text) > self.limit:
            text = text[: max(0, self.limit - 3)] + "..."
        return text

    def __repr__(self) -> str:
        return f"Scrubber({len(self._secrets)} secrets, limit={self.limit})"
