"""deploy/nginx/pmsgate.conf in front of two `pmsgate serve` replicas, all real processes.

Issue 15 item 2: the replicated topology of deploy/compose.yaml run on this machine
(docs/deploy.md): nginx from Debian with the committed configuration (only the replicas'
and its own addresses changed to loopback ports), two replicas on this run's PostgreSQL
and Redis, `pmsgate sandbox` as the booking system. Calls through the proxy succeed, the
facility gets one token for both replicas, and a replica killed mid-load costs no call but
those it was answering at that moment.

nginx comes from Debian (``nginx-light``); when missing it is installed with apt-get once
per machine. Where it cannot be, the test is skipped — except under CI=true (a failure).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from pmsgate.gateway.vault import generate_key_spec
from tests.debian import debian_program
from tests.e2e.processes import free_port, pmsgate, sandbox_process, scratch_database
from tests.support.nginx import SITE as CONF
from tests.support.nginx import write_nginx_conf
from tests.support.servers import process_alive, wait_until_answering

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

CALLS = 120
WORKERS = 4
KILL_AFTER = 30  # calls answered before one replica is killed


@contextmanager
def nginx(binary: str, directory: Path, listen: int, replicas: list[int]) -> Iterator[None]:
    """The committed configuration, with loopback addresses for the replicas and itself."""
    site = CONF.read_text(encoding="utf-8").replace("listen 80;", f"listen 127.0.0.1:{listen};")
    conf = write_nginx_conf(directory, site, replicas, foreground=True)
    process = subprocess.Popen(
        [binary, "-c", str(conf), "-p", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_answering(
            f"http://127.0.0.1:{listen}/healthz",
            alive=process_alive(process),
            within=30,
            failure=lambda: (
                "nginx did not start: "
                + (directory / "error.log").read_text(errors="replace")[-2000:]
            ),
        )
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_calls_through_the_proxy_survive_a_killed_replica(
    tmp_path: Path, redis_url: str, redis_namespace: str
) -> None:
    binary = debian_program("nginx", "nginx-light")
    with ExitStack() as stack:
        database_url = stack.enter_context(scratch_database("pmsgate_test_proxy"))
        sandbox_port, facility = stack.enter_context(sandbox_process())
        kross = f"http://127.0.0.1:{sandbox_port}/kross"
        env = {
            "PMSGATE_DATA_DIR": str(tmp_path / "data"),
            "PMSGATE_DATABASE_URL": database_url,
            "PMSGATE_REDIS_URL": redis_url,
            "PMSGATE_REDIS_NAMESPACE": redis_namespace,
            "PMSGATE_SECRET_KEYS": generate_key_spec("proxy"),
            "PMSGATE_KROSS_BASE_URL": kross,
            "PMSGATE_PARTNER_API_KEY": facility["api_key"],
            "PMSGATE_FORWARDED_ALLOW_IPS": "127.0.0.1",  # the proxy's address, as deployed
            # No job at start-up: the first calls, on both replicas at once, need the token.
            "PMSGATE_SCHEDULER_ENABLED": "false",
        }
        assert pmsgate("db", "upgrade", env=env).returncode == 0
        added = pmsgate(
            "facilities", "add",
            "--hotel-id", facility["hotel_id"],
            "--username", facility["username"],
            "--kind", "partner",
            "--integration-id", f"int-{facility['hotel_id']}",
            "--password-stdin", "--json",
            env=env,
            stdin=facility["password"] + "\n",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        key = json.loads(added.stdout)["gateway_key"]
        ports = [free_port(), free_port()]
        processes: list[subprocess.Popen[bytes]] = []
        for port in ports:
            process = subprocess.Popen(
                [sys.executable, "-m", "pmsgate.cli", "serve", "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, **env},
            )
            stack.callback(process.wait, 15)
            stack.callback(lambda p=process: p.poll() is None and p.terminate())
            processes.append(process)
        for port, process in zip(ports, processes, strict=True):
            wait_until_answering(
                f"http://127.0.0.1:{port}/readyz",
                alive=process_alive(process),
                within=90,
                failure=lambda: "serve did not start",
                ready=lambda answer: answer.status_code == 200,
            )
        proxy_port = free_port()
        stack.enter_context(nginx(binary, tmp_path, proxy_port, ports))
        proxy = stack.enter_context(
            httpx.Client(base_url=f"http://127.0.0.1:{proxy_port}", timeout=30)
        )
        headers = {"Authorization": f"Bearer {key}"}

        # /metrics is not routed by the proxy; the replicas do serve it.
        assert proxy.get("/metrics").status_code == 404

        # Warm-up: both replicas at once, before either has a token or a cached answer.
        with ThreadPoolExecutor(max_workers=8) as pool:
            warm = list(
                pool.map(
                    lambda _: proxy.post("/v1/tools/get-in-house-guests", json={}, headers=headers),
                    range(8),
                )
            )
        assert [answer.status_code for answer in warm] == [200] * 8, warm[0].text

        # The load: WORKERS callers in a loop; replica 1 is killed after KILL_AFTER answers.
        lock = threading.Lock()
        calls: list[tuple[float, float, int]] = []  # started, ended, status (0 = no answer)
        answered_enough = threading.Event()
        issued = iter(range(CALLS))

        def caller() -> None:
            with httpx.Client(base_url=f"http://127.0.0.1:{proxy_port}", timeout=30) as http:
                while True:
                    with lock:
                        if next(issued, None) is None:
                            return
                    started = time.monotonic()
                    try:
                        status = http.post(
                            "/v1/tools/get-in-house-guests", json={}, headers=headers
                        ).status_code
                    except httpx.TransportError:
                        status = 0
                    with lock:
                        calls.append((started, time.monotonic(), status))
                        if len(calls) >= KILL_AFTER:
                            answered_enough.set()

        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            for _ in range(WORKERS):
                pool.submit(caller)
            assert answered_enough.wait(timeout=40)
            killed_at = time.monotonic()  # before the signal: a call failing from here on
            processes[0].send_signal(signal.SIGKILL)
            assert processes[0].wait(timeout=10) == -signal.SIGKILL
            dead_at = time.monotonic()  # the replica's sockets are closed by now
        assert len(calls) == CALLS
        failed = [(s, e, status) for s, e, status in calls if status != 200]
        # Only calls that reached the replica before it was gone may fail (it dies some
        # milliseconds after the signal; such calls wait for it and get a 502). Each caller
        # has one call in flight at a time; every call after its death succeeds.
        assert all(s <= dead_at and e >= killed_at for s, e, _ in failed), (killed_at, failed)
        assert len(failed) <= WORKERS, failed
        after_death = [status for s, _, status in calls if s > dead_at]
        assert after_death and set(after_death) == {200}

        stats = httpx.get(f"{kross}/_sandbox/stats").json()
        assert stats["tokens_issued"]["by_hotel"] == {facility["hotel_id"]: 1}
