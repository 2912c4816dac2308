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
