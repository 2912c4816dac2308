"""The last resort: an exception nobody foresaw answers the error body and logs its type only."""

from __future__ import annotations

import httpx
import pytest
import structlog.testing
from fastapi import APIRouter, FastAPI

from pmsgate.errors import install_error_handlers

pytestmark = pytest.mark.anyio


async def test_an_unforeseen_exception_is_a_500_error_body_and_its_text_is_never_logged() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("postgresql://app:hunter2@db refused")

    transport = httpx.ASGITransport(app=app)  # re-raises app exceptions: none may escape
    with structlog.testing.capture_logs() as logs:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.get("/boom")
    assert answer.status_code == 500
    assert answer.json()["error"]["code"] == "internal_error"
    assert "hunter2" not in answer.text
    assert [line["error_type"] for line in logs if line["event"] == "unexpected_error"] == [
        "RuntimeError"
    ]
    assert "hunter2" not in str(logs)


async def test_a_405_names_every_method_of_the_path_in_allow() -> None:
    app = FastAPI()
    install_error_handlers(app)
    router = APIRouter(prefix="/things")

    @router.get("")
    async def read() -> None: ...

    @router.post("")
    async def write() -> None: ...

    app.include_router(router)

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        answer = await client.put("/things")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, POST"
    assert answer.json()["error"]["code"] == "method_not_allowed"
