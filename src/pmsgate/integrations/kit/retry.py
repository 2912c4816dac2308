"""The one retry policy of every upstream client, built on stamina.

A request is attempted at most :attr:`RetryPolicy.attempts` times in all (the first
try included), within :attr:`RetryPolicy.deadline_s`. Between attempts stamina waits
with jittered exponential backoff, or exactly the upstream's ``Retry-After`` when it
gave one. Nothing is retried that should not be:

- only failures whose class is ``retryable`` (rate limits, 5xx, timeouts, transport);
- never a request that **may have been applied** (``may_have_been_sent``) unless the
  caller says it is replay-safe (reads, idempotent writes);
- never past a ``Retry-After`` longer than :attr:`RetryPolicy.max_retry_after_s` or
  the deadline: very long waits would pile requests up;
  the failure goes back to the caller, who can plan (serve stale, report, reschedule).

Retries are not stacked: a client retries at one level only (the gateway around the
booking-system client, each platform client around its own requests), and says in
its docstring how many attempts a call makes in the worst case.

Tests switch stamina to its testing mode (no waits, same attempt counts) and read the
decisions through :meth:`RetryPolicy.verdict`, which is pure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import stamina

from pmsgate.integrations.kit.errors import UpstreamError

# What stamina's ``on`` hook answers: False = give up, True = back off, float = wait so long.
Verdict = bool | float
WaitHook = Callable[[UpstreamError, float], float]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently one upstream request is tried."""

    attempts: int = 4
    deadline_s: float | None = 30.0
    wait_initial_s: float = 0.5
    wait_max_s: float = 8.0
    wait_jitter_s: float = 0.5
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a request is attempted at least once")

    def verdict(self, error: BaseException, *, replay_safe: bool) -> Verdict:
        """Whether to try again after ``error``, and how long to wait (stamina's hook contract)."""
        if not isinstance(error, UpstreamError) or not error.retryable:
            return False
        if error.may_have_been_sent and not replay_safe:
            return False
        wait = error.retry_after
        if wait is None:
            return True
        if wait > self.max_retry_after_s:
            return False
        if self.deadline_s is not None and wait > self.deadline_s:
            return False
        return wait

    def retrying(
        self, *, replay_safe: bool, on_wait: WaitHook | None = None
    ) -> AsyncIterator[stamina.Attempt]:
        """stamina's attempts for one request: ``async for attempt in …: with attempt: …``.

        ``on_wait`` sees every upstream-given wait and returns the wait stamina should
        still do itself (a client whose throttle holds back for the upstream's wait
        returns 0, so the wait is not done twice).
        """

        def on(error: Exception) -> Verdict:
            decided = self.verdict(error, replay_safe=replay_safe)
            if isinstance(decided, bool) or on_wait is None:
                return decided
            assert isinstance(error, UpstreamError)
            return on_wait(error, decided)

        return stamina.retry_context(
            on=on,
            attempts=self.attempts,
            timeout=self.deadline_s,
            wait_initial=self.wait_initial_s,
            wait_max=self.wait_max_s,
            wait_jitter=self.wait_jitter_s,
        )
