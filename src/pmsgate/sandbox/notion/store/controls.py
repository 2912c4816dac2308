"""The emulator's test controls: workspaces and their tokens, rate limits, the clock, faults."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pmsgate.clock import ManualClock
from pmsgate.sandbox.core import set_given
from pmsgate.sandbox.notion.errors import not_found, validation
from pmsgate.sandbox.notion.seed import DATABASE_TITLE
from pmsgate.sandbox.notion.store.core import StoreCore
from pmsgate.sandbox.notion.store.parsing import normalise_id
from pmsgate.sandbox.notion.store.records import Faults


class ControlsMixin(StoreCore):
    """What tests and the demo change and read beside the API."""

    def workspaces(self) -> list[dict[str, Any]]:
        """Tokens, database ids and each page's seeded ground truth (reset restores it)."""
        return [
            {
                "workspace_id": ws.id,
                "name": ws.name,
                "hotel_id": ws.hotel_id,
                "token": ws.token,
                "bot_id": ws.bot_id,
                "database_id": ws.database_id,
                "data_source_id": ws.data_source_id,
                "database_title": DATABASE_TITLE,
                "rate_limit": {"requests_per_second": ws.bucket.rate, "burst": ws.bucket.burst},
                "pages": [truth.as_dict() for truth in ws.truth],
            }
            for ws in self._workspaces.values()
        ]

    def set_rate_limit(
        self,
        requests_per_second: float | None = None,
        burst: int | None = None,
        workspace_id: str | None = None,
    ) -> dict[str, float]:
        """Change the bucket of one workspace, or of all (until the next reset); it starts full."""
        if workspace_id is not None:
            if workspace_id not in self._workspaces:
                raise not_found("workspace", workspace_id)
            targets = [self._workspaces[workspace_id]]
        else:
            targets = list(self._workspaces.values())
            self.requests_per_second = requests_per_second or self.requests_per_second
            self.burst = burst or self.burst
        now = self.clock.now().timestamp()
        for ws in targets:
            if requests_per_second is not None:
                ws.bucket.rate = requests_per_second
            if burst is not None:
                ws.bucket.burst = burst
            # A new limit starts with a full bucket, as after a quiet period.
            ws.bucket.tokens, ws.bucket.updated = float(ws.bucket.burst), now
        first = targets[0].bucket if targets else self._new_bucket(now)
        return {"requests_per_second": first.rate, "burst": first.burst}

    def advance_clock(self, seconds: float) -> datetime:
        """Move a ManualClock forward; any other clock refuses."""
        if not isinstance(self.clock, ManualClock):
            raise validation("The emulator's clock is not a ManualClock.")
        return self.clock.advance(seconds)

    def set_faults(
        self,
        latency_s: float | None = None,
        error_rate: float | None = None,
        fail_ids: list[str] | None = None,
    ) -> Faults:
        """Arm faults (the ones not given stay as they are)."""
        ids = None if fail_ids is None else {normalise_id(i, "body.fail_ids") for i in fail_ids}
        return set_given(self.faults, latency_s=latency_s, error_rate=error_rate, fail_ids=ids)

    def clear_faults(self) -> None:
        """Disarm every fault."""
        self.faults = Faults()
