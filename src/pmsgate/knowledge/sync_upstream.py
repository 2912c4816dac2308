"""Upstream patience: a 429 or an outage that outlasts a client's own retries, waited out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import TypeVar

import structlog

from pmsgate.clock import Sleep
from pmsgate.integrations.assistant.errors import AssistantRateLimited, AssistantUnavailable
from pmsgate.integrations.notion.errors import NotionConflict, NotionRateLimited, NotionUnavailable

log = structlog.get_logger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class UpstreamPatience:
    """How long a sync waits for the notes workspace and the assistant platform: a 429 or an
    outage that outlasts a client's own retries is waited out, up to these limits."""

    sleep: Sleep
    _: KW_ONLY
    max_upstream_rounds: int
    max_upstream_wait_s: float
    max_rate_limited_wait_s: float

    async def call(self, call: Callable[[], Awaitable[T]]) -> T:
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
            except (AssistantRateLimited, NotionRateLimited) as error:
                wait = error.retry_after if error.retry_after is not None else 5.0
                limited_s += wait
                if wait > self.max_upstream_wait_s or limited_s > self.max_rate_limited_wait_s:
                    raise
                log.info("knowledge_upstream_wait", code=error.code, wait_s=wait)
                await self.sleep(wait)
            except (AssistantUnavailable, NotionUnavailable, NotionConflict) as error:
                outages += 1
                if outages >= self.max_upstream_rounds:
                    raise
                wait = min(60.0, 2.0**outages)
                log.info("knowledge_upstream_wait", code=error.code, wait_s=wait, round=outages)
                await self.sleep(wait)
