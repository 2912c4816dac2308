"""The gateway's /metrics, scraped from loopback as Prometheus does."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

LOCAL = ("127.0.0.1", 50000)  # /metrics answers loopback callers only

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(app: Any) -> Samples:
    """Every sample ``app``'s /metrics shows, by name and labels."""
    transport = httpx.ASGITransport(app=app, client=LOCAL)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as local:
        answer = await local.get("/metrics")
    assert answer.status_code == 200, answer.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }
