"""Servers a test talks to over loopback: an app served by uvicorn, a child process.

uvicorn and child processes offer no event for "ready"; both waits poll with a deadline
and assert nothing about timing.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import uvicorn


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def serving_app(app: Any, port: int, *, within: float = 15) -> AsyncIterator[str]:
    """``app`` served by uvicorn (with its lifespan) on 127.0.0.1:``port``; its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on")
    )
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(within):
            while not server.started:  # noqa: ASYNC110  # uvicorn exposes a flag, no event
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


def wait_until_answering(
    url: str,
    *,
    alive: Callable[[], bool],
    within: float,
    failure: Callable[[], str],
    ready: Callable[[httpx.Response], bool] = lambda _: True,
    poll: float = 0.05,
) -> None:
    """Poll ``url`` until it answers as ``ready`` says; raise ``failure()`` as a
    RuntimeError when the server is no longer ``alive`` or ``within`` seconds have passed."""
    deadline = time.monotonic() + within
    while True:
        try:
            if ready(httpx.get(url, timeout=1)):
                return
        except httpx.TransportError:
            pass
        if not alive() or time.monotonic() > deadline:
            raise RuntimeError(failure())
        time.sleep(poll)


def process_alive(process: subprocess.Popen[Any]) -> Callable[[], bool]:
    """Whether the child process still runs (for :func:`wait_until_answering`)."""
    return lambda: process.poll() is None
