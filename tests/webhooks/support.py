"""A webhook receiver on loopback (a real HTTP server in a thread) and the sandbox for webhooks.

:class:`Receiver` records every request (headers, body) and answers with the statuses a
test queues (204 once the queue is empty). :func:`webhook_sandbox` is the web sandbox with
http:// allowed to loopback receivers; its two containers (the enrolled one and the web
app's) are two replicas on one database, each with its own engine and deliverer.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pmsgate.audit.actions import Actor
from pmsgate.clock import ManualClock
from pmsgate.webhooks.delivery import WebhookDeliverer
from tests.web.support import WebSandbox, web_sandbox

ADMIN = Actor.admin("admin@example.com")


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """What a loopback receiver got, and the statuses it answers next."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self) -> int:
        with self._lock:
            return self.statuses.pop(0) if self.statuses else 204

    def record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    def ids(self) -> list[str]:
        """The ``webhook-id`` of every request, in arrival order."""
        return [r.headers["webhook-id"] for r in self.requests]


@contextmanager
def receiver() -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (a free port) until the block ends."""
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the stdlib's name
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            state.record(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(state.answer())
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@asynccontextmanager
async def webhook_sandbox(
    database_url: str, *, real_time: bool = False, **settings: Any
) -> AsyncIterator[WebSandbox]:
    """The web sandbox, loopback http:// receivers allowed; ``real_time``: its ManualClock
    starts at the wall-clock time (for verifiers that check the timestamp's age)."""
    clock = ManualClock(datetime.now(UTC)) if real_time else None
    async with web_sandbox(
        database_url,
        settings_overrides={"webhook_allow_loopback_http": True, **settings},
        clock=clock,
    ) as web:
        yield web


def replicas(web: WebSandbox) -> tuple[WebhookDeliverer, WebhookDeliverer]:
    """The two deliverers of the sandbox's two containers (two engines, one database)."""
    return web.web.webhook_deliverer, web.enrolled.container.web.webhook_deliverer
