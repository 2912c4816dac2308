"""The request id and client address of the HTTP request being served, for logs and the audit trail.

The app's one HTTP layer (:class:`pmsgate.gateway.http_front.HttpFrontMiddleware`, plain
ASGI) takes the caller's ``X-Request-ID`` when it is short and
plain (letters, digits, ``.``, ``_``, ``-``; at most 64 characters: it is echoed in a header
and stored in audit events, so nothing else is trusted), otherwise makes one; it answers
with it in ``X-Request-ID``, binds it into structlog's context variables (every log line of
the request carries it) and keeps it, with the client address, in context variables that
:func:`current_request_id` and :func:`current_client_address` read. Code below the routes
(the audit trail) picks both up without a request object being passed down.

Plain ASGI rather than ``@app.middleware("http")``: it adds no per-request task, so the
context variables it sets (:func:`bind_request`) are the ones the routes see.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from contextvars import ContextVar, Token
from typing import Any

import structlog

REQUEST_ID_HEADER = "X-Request-ID"
MAX_REQUEST_ID = 64
_VALID_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A client address as the ASGI server reports it (IPv4, IPv6, or a test client's name).
MAX_CLIENT_ADDRESS = 64

_request_id: ContextVar[str | None] = ContextVar("pmsgate_request_id", default=None)
_client_address: ContextVar[str | None] = ContextVar("pmsgate_client_address", default=None)


def new_request_id() -> str:
    """A fresh request id (16 hex characters, 64 random bits; no UUID object per request)."""
    return secrets.token_hex(8)


def accepted_request_id(raw: str | None) -> str | None:
    """``raw`` when it is an acceptable request id, else None."""
    if raw is None or len(raw) > MAX_REQUEST_ID or not _VALID_REQUEST_ID.fullmatch(raw):
        return None
    return raw


def current_request_id() -> str | None:
    """The id of the request being served, if any (None in a CLI command or a job)."""
    return _request_id.get()


def current_client_address() -> str | None:
    """The client address of the request being served, if any."""
    return _client_address.get()


RequestTokens = tuple[Token[str | None], Token[str | None], Mapping[str, Token[Any]]]


def bind_request(request_id: str, address: str | None) -> RequestTokens:
    """Make ``request_id`` and ``address`` the current request's (and the id structlog's)."""
    return (
        _request_id.set(request_id),
        _client_address.set(address),
        structlog.contextvars.bind_contextvars(request_id=request_id),
    )


def unbind_request(tokens: RequestTokens) -> None:
    """Undo :func:`bind_request`: the values before it are current again."""
    rid_token, address_token, log_tokens = tokens
    structlog.contextvars.reset_contextvars(**log_tokens)
    _client_address.reset(address_token)
    _request_id.reset(rid_token)
