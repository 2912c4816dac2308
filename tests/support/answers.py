"""What an HTTP answer of pmsgate's says: the error object of a refusal."""

from __future__ import annotations

from typing import Any

import httpx


def assert_error(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """``answer`` has the status ``status`` and the error code ``code``; its error object."""
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == code, answer.text
    return error


def assert_refusal(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Like :func:`assert_error`, and the body is exactly ``{"error": {code, message, hint}}``."""
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "hint"}
    assert body["error"]["code"] == code
    error: dict[str, Any] = body["error"]
    return error
