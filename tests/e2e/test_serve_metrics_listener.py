"""`pmsgate serve` with PMSGATE_METRICS_ADDRESS: /metrics on a listener of its own, as a process.

The main address has no /metrics at all; the metrics address answers /metrics (with its
token, when one is set) and nothing else; both stop together (docs/operations.md).
"""

from __future__ import annotations

import httpx

from pmsgate.gateway.vault import generate_key_spec
from tests.e2e.processes import free_port, pmsgate, serving

METRICS_TOKEN = "metrics-token-for-e2e-0123456789"


def test_serve_starts_the_metrics_listener_on_its_own_address(tmp_path):
    gateway_port, metrics_port = free_port(), free_port()
    env = {
        "PMSGATE_DATA_DIR": str(tmp_path),
        "PMSGATE_SECRET_KEYS": generate_key_spec("e2e"),
        "PMSGATE_DATABASE_URL": "",
        "PMSGATE_REDIS_URL": "",
        "PMSGATE_METRICS_ADDRESS": f"127.0.0.1:{metrics_port}",
        "PMSGATE_METRICS_TOKEN": METRICS_TOKEN,
    }
    migrated = pmsgate("db", "upgrade", env=env)
    assert migrated.returncode == 0, migrated.stderr
    gateway = f"http://127.0.0.1:{gateway_port}"
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    with serving("serve", "--port", str(gateway_port), ready_url=f"{gateway}/healthz", env=env):
        on_main = httpx.get(f"{gateway}/metrics")
        scraped = httpx.get(metrics, headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        anonymous = httpx.get(metrics)
        other = httpx.get(f"http://127.0.0.1:{metrics_port}/healthz")
    assert on_main.status_code == 404
    assert on_main.json()["error"]["code"] == "not_found"
    assert scraped.status_code == 200
    assert "pmsgate_tool_calls" in scraped.text
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "invalid_metrics_token"
    assert other.status_code == 404
