"""Driving pmsgate's authorization server as an app and a signed-in person would, over HTTP.

:func:`consent` is what a person does in the browser once the app sent them to
``/oauth/authorize``: follow the redirect to the console's consent page, read its form, and
answer it; the answer's redirect carries the code. :func:`connect` is a whole flow through
the endpoints (registration, PKCE, consent, token exchange) for the refusal tests.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

REDIRECT_URI = "http://127.0.0.1:9/callback"


def pkce() -> tuple[str, str]:
    """A code verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


def form_fields(page: str) -> dict[str, str]:
    """The hidden fields and the first facility offered on the consent page."""
    fields = {
        name: html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    }
    facility = re.search(r'<option value="(\d+)"', page)
    if facility is not None:
        fields["facility"] = facility.group(1)
    return fields


def query_of(location: str) -> dict[str, str]:
    """The query parameters of a redirect's location."""
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


async def consent(
    browser: httpx.AsyncClient, authorize_url: str, *, decision: str = "allow", **answer: str
) -> dict[str, str]:
    """Follow ``authorize_url`` as the signed-in ``browser``, answer the consent page; the
    parameters the app's redirect URI receives (``code`` and ``state``, or ``error``)."""
    sent = await browser.get(authorize_url)
    assert sent.status_code == 302, sent.text
    page = await browser.get(sent.headers["location"])
    assert page.status_code == 200, page.text
    fields = {**form_fields(page.text), "decision": decision, **answer}
    answered = await browser.post("/console/oauth/consent", data=fields)
    assert answered.status_code == 303, answered.text
    return query_of(answered.headers["location"])


@dataclass
class Connected:
    """An app registered and authorized: its client id and tokens."""

    client_id: str
    access_token: str
    refresh_token: str
    scope: str


async def register(app: httpx.AsyncClient, **metadata: object) -> str:
    """Register a public client; its client_id."""
    body = {
        "redirect_uris": [REDIRECT_URI],
        "client_name": "Test assistant",
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        **metadata,
    }
    answer = await app.post("/oauth/register", json=body)
    assert answer.status_code == 201, answer.text
    client_id: str = answer.json()["client_id"]
    return client_id


def authorize_url(client_id: str, challenge: str, **params: str) -> str:
    """The app's authorization request (S256, the MCP resource unless told)."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "st-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": "http://pmsgate.test/mcp",
        **params,
    }
    return "/oauth/authorize?" + urlencode(query)


async def connect(app: httpx.AsyncClient, browser: httpx.AsyncClient, **params: str) -> Connected:
    """Register, authorize (consent in ``browser``) and exchange the code: the tokens."""
    client_id = await register(app, **({"scope": params["scope"]} if "scope" in params else {}))
    verifier, challenge = pkce()
    answer = await consent(browser, authorize_url(client_id, challenge, **params))
    tokens = await app.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )
    assert tokens.status_code == 200, tokens.text
    body = tokens.json()
    return Connected(client_id, body["access_token"], body["refresh_token"], body["scope"])
