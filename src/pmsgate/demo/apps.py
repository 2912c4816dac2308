"""Demo chapter 6: apps connected to the customer — an assistant app signed in with OAuth,
and the customer's own system told of events by a signed webhook.

Both go through the real code: the app speaks to the gateway's HTTP interface
(``httpx.ASGITransport`` onto the app), the consent and the disconnection are the console's
pages as the signed-in customer, and the ``deliver-webhooks`` job POSTs to a receiver
served on loopback, which checks the signature with the Standard Webhooks library.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import html
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from pydantic import SecretStr
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from pmsgate.app import create_app
from pmsgate.audit.actions import Actor
from pmsgate.clock import Clock
from pmsgate.container import open_container
from pmsgate.demo.assistant import served_on_loopback
from pmsgate.demo.onboarding import CONSOLE_URL, Onboarded, customer_file_of, demo_facilities
from pmsgate.demo.story import Story
from pmsgate.jobs import CHECK_CONNECTIONS, build_scheduler
from pmsgate.sandbox.customers import ClockSleep, sandbox_http_factory
from pmsgate.webhooks.delivery import DELIVER_WEBHOOKS

APP_NAME = "Front Desk Assistant"
# A native app's loopback listener: the code comes back there (never reached in the demo).
REDIRECT_URI = "http://127.0.0.1:33418/callback"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
LOST = "facility.connection_lost"
# How far a request's timestamp may be from the receiver's now (as the library's check).
FRESH_S = 300
HIDDEN = r'<input type="hidden" name="([^"]+)" value="([^"]*)"'

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def apps_chapter(story: Story, onboarded: Onboarded) -> None:
    """The Route A customer connects an assistant app, then hears of a lost connection."""
    story.chapter(6, "Apps: an assistant signed in with OAuth, a signed webhook")
    sandbox, clock = onboarded.sandbox, onboarded.clock
    settings = onboarded.settings.model_copy(
        # http:// to a loopback receiver: development and the sandbox only (docs/webhooks.md).
        update={"public_url": CONSOLE_URL, "webhook_allow_loopback_http": True}
    )
    partner, _ = demo_facilities(sandbox)
    customer = customer_file_of(sandbox, partner)
    async with open_container(
        settings,
        http_factory=sandbox_http_factory(sandbox.asgi_app()),
        clock=clock,
        sleep=ClockSleep(clock),
    ) as container:
        web = container.web
        app = create_app(settings, container=container)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),  # the MCP session manager runs
            httpx.AsyncClient(transport=transport, base_url=CONSOLE_URL) as assistant,
            httpx.AsyncClient(transport=transport, base_url=CONSOLE_URL) as browser,
        ):
            # The customer signs in to the console (its password set here for the demo).
            password = secrets.token_urlsafe(12)
            await web.users.set_password(customer.email, SecretStr(password))
            login = {"email": customer.email, "password": password}
            signed = await browser.post("/api/auth/login", json=login)
            signed.raise_for_status()
            csrf = signed.json()["csrfToken"]
            await _oauth(story, assistant, browser, csrf, clock.now().date())
        scheduler = build_scheduler(web)
        # Earlier chapters' events had no subscriber: fanned out to nobody, sent nowhere.
        await scheduler.run_once(DELIVER_WEBHOOKS)
        receiver = Receiver(clock)
        async with served_on_loopback(receiver) as receiver_url:
            created = await web.webhooks.subscribe(
                customer.student_id,
                f"{receiver_url}/pmsgate-events",
                [LOST],
                actor=Actor.customer_user(customer.email),
                description="The customer's front-desk system",
            )
            receiver.secret = created.secret
            story.say(
                f"The customer subscribes its front-desk system to {LOST} "
                f"(a loopback receiver here); the signing secret is shown once, to them."
            )
            sandbox.kross.change_password(str(partner["hotel_id"]), "demo-" + secrets.token_hex(6))
            await scheduler.run_once(CHECK_CONNECTIONS)
            runs = [await scheduler.run_once(DELIVER_WEBHOOKS) for _ in range(2)]
        await _webhook_told(story, web, receiver, runs, customer.student_id)


async def _oauth(
    story: Story,
    assistant: httpx.AsyncClient,
    browser: httpx.AsyncClient,
    csrf: str,
    today: dt.date,
) -> None:
    """Discovery, registration, consent, the code with PKCE, one call, then disconnected."""
    refused = await assistant.post("/mcp", json=_rpc("tools/list", {}), headers=MCP_HEADERS)
    challenge = refused.headers["www-authenticate"]
    metadata_url = re.search(r'resource_metadata="([^"]+)"', challenge)
    resource = (await assistant.get(metadata_url.group(1) if metadata_url else "")).json()
    issuer = resource["authorization_servers"][0]
    server = (await assistant.get(f"{issuer}/.well-known/oauth-authorization-server")).json()
    story.say(
        f"An assistant app is given only the server's address, {CONSOLE_URL}/mcp. Its first "
        f"call: HTTP {refused.status_code}, and the refusal says where to read more; the "
        f"resource's document names the authorization server ({issuer}), whose metadata "
        f"lists registration, authorize and token endpoints, PKCE "
        f"{', '.join(server['code_challenge_methods_supported'])} only."
    )
    registration = await assistant.post(
        server["registration_endpoint"],
        json={
            "client_name": APP_NAME,
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        },
    )
    client_id = registration.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "state": secrets.token_urlsafe(8),
        "code_challenge": base64.urlsafe_b64encode(digest).decode().rstrip("="),
        "code_challenge_method": "S256",
        "resource": resource["resource"],
    }
    # The app opens the browser: the customer, signed in, sees the consent page.
    sent = await browser.get(f"{server['authorization_endpoint']}?{urlencode(query)}")
    page = await browser.get(sent.headers["location"])
    option = re.search(r'<option value="(\d+)">([^<]+)</option>', page.text)
    fields = {name: html.unescape(value) for name, value in re.findall(HIDDEN, page.text)}
    fields.update(decision="allow", facility=option.group(1) if option else "")
    answered = await browser.post("/console/oauth/consent", data=fields)
    code = _query_of(answered.headers["location"]).get("code", "")
    exchanged = await assistant.post(
        server["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )
    tokens = exchanged.json()
    facility = html.unescape(option.group(2)) if option else "?"
    story.say(
        f"It registers itself (HTTP {registration.status_code}) as '{APP_NAME}'. The "
        f"customer's consent page (HTTP {page.status_code}) offers its one property, "
        f"{facility}; 'Allow' sends the app back with a code, which it exchanges with its "
        f"PKCE verifier (HTTP {exchanged.status_code}): scope {tokens['scope']}, an access "
        f"token for {int(tokens['expires_in']) // 60} minutes and a refresh token."
    )
    bearer = {**MCP_HEADERS, "Authorization": f"Bearer {tokens['access_token']}"}
    arguments = {
        "arrival": (today + dt.timedelta(days=45)).isoformat(),
        "departure": (today + dt.timedelta(days=48)).isoformat(),
    }
    call = _rpc("tools/call", {"name": "check-availability", "arguments": arguments})
    answer = await assistant.post("/mcp", json=call, headers=bearer)
    free = _availability(answer)
    listed = await browser.get("/console/oauth/grants")
    grant = re.search(r'data-grant="(\d+)"', listed.text)
    revoked = await browser.post(
        f"/console/oauth/grants/{grant.group(1) if grant else 0}/revoke",
        data={"csrf_token": csrf},
    )
    after = await assistant.post("/mcp", json=call, headers=bearer)
    story.say(
        f"check-availability over MCP with the token: HTTP {answer.status_code}, {free}. "
        f"The customer disconnects '{APP_NAME}' under Connected apps (HTTP "
        f"{revoked.status_code}); the app's next call: HTTP {after.status_code} "
        f"{after.json()['error']['code']}."
    )
    story.measured(
        "Apps",
        f"an assistant app connected by OAuth from the server's address alone "
        f"({tokens['scope']}, one facility), answered ({answer.status_code}), "
        f"disconnected and refused ({after.status_code})",
    )


@dataclass
class Receiver:
    """The customer's receiver: an ASGI app that verifies each request's signature.

    The Standard Webhooks library signs the request's id, timestamp and body with the
    secret, and the result must be one of the ``webhook-signature`` header's. Its own
    ``verify`` also wants the timestamp within five minutes of the wall clock; the demo runs
    on its own clock (a fixed day), so that freshness is checked against the demo's clock.
    """

    clock: Clock
    secret: str = ""
    got: list[tuple[str, str, bool]] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {key.decode(): value.decode() for key, value in scope["headers"]}
        verified = self.verified(body.decode(), headers)
        event = json.loads(body or b"{}")
        self.got.append((headers.get("webhook-id", "?"), str(event.get("type")), verified))
        await send({"type": "http.response.start", "status": 204 if verified else 400})
        await send({"type": "http.response.body", "body": b""})

    def verified(self, body: str, headers: dict[str, str]) -> bool:
        """One of the request's signatures is the library's, and it is fresh."""
        try:
            sent_at = dt.datetime.fromtimestamp(int(headers["webhook-timestamp"]), dt.UTC)
            expected = Webhook(self.secret).sign(headers["webhook-id"], sent_at, body)
        except (KeyError, ValueError, WebhookVerificationError):
            return False
        fresh = abs((self.clock.now() - sent_at).total_seconds()) <= FRESH_S
        given = headers.get("webhook-signature", "").split(" ")
        return fresh and any(hmac.compare_digest(expected, one) for one in given)


async def _webhook_told(
    story: Story, web: Any, receiver: Receiver, runs: list[Any], student_id: str
) -> None:
    """What the delivery job did, what the receiver got, and the delivery log."""
    sent = [run.detail.get("delivered", 0) if isinstance(run.detail, dict) else 0 for run in runs]
    story.say(
        "Then the booking-system password changes: the scheduled access check marks the "
        f"facility in error, and {DELIVER_WEBHOOKS} runs twice (delivered {sent[0]}, then "
        f"{sent[-1]}). The receiver checks each request with the Standard Webhooks library:"
    )
    for event_id, kind, verified in receiver.got:
        story.say(f"  event {event_id}, {kind}:")
        story.say(f"  {'signature verified' if verified else 'signature NOT verified'}.")
    log = [d for d in await web.webhooks.deliveries(student_id) if d.event_type == LOST]
    for delivery in log:
        story.say(
            f"Delivery log: {delivery.event_type}, {delivery.status}, {delivery.attempts} "
            f"attempt(s), HTTP {delivery.response_status}."
        )
    checked = sum(1 for _, _, ok in receiver.got if ok)
    story.measured(
        "Apps",
        f"{LOST} delivered {len(receiver.got)} time(s), signature verified {checked}",
    )


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _query_of(location: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def _availability(answer: httpx.Response) -> str:
    """A check-availability answer over MCP in words."""
    if answer.status_code != 200:
        return "no answer"
    result = answer.json().get("result", {})
    data = result.get("structuredContent")
    if data is None and result.get("content"):
        data = json.loads(result["content"][0].get("text", "{}"))
    data = (data or {}).get("data", data) or {}
    if "apartments" in data:
        return f"{data['available_count']} of {len(data['apartments'])} apartments free"
    return "answered"
