"""Prometheus metrics of the gateway, on a registry of its own (one per app instance)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest


class GatewayMetrics:
    """Counters and gauges exposed at ``/metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.tool_calls = Counter(
            "pmsgate_tool_calls",
            "Tool and operation calls answered, by tool and outcome.",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.upstream_calls = Counter(
            "pmsgate_upstream_calls",
            "Requests sent to the booking system, by facility, operation and outcome.",
            ["hotel_id", "operation", "outcome"],
            registry=self.registry,
        )
        self.upstream_429s = Counter(
            "pmsgate_upstream_429",
            "Rate-limit answers received from the booking system, by facility.",
            ["hotel_id"],
            registry=self.registry,
        )
        self.cache_hits = Counter(
            "pmsgate_cache_hits",
            "Answers served from the read cache, by staleness.",
            ["stale"],
            registry=self.registry,
        )
        self.stale_answers = Counter(
            "pmsgate_stale_answers",
            "Tool answers marked stale, by tool.",
            ["tool"],
            registry=self.registry,
        )
        self.token_refreshes = Counter(
            "pmsgate_token_refreshes",
            "Tokens obtained from the booking system, by facility.",
            ["hotel_id"],
            registry=self.registry,
        )
        self.budget_remaining = Gauge(
            "pmsgate_budget_remaining",
            "Upstream requests left in each window, by facility (updated on /metrics).",
            ["hotel_id", "window"],
            registry=self.registry,
        )

        self.redis_up = Gauge(
            "pmsgate_redis_up",
            "1 while Redis (shared limits, cache, locks) answers, 0 during an outage.",
            registry=self.registry,
        )

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
