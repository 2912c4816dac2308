"""The operational endpoints protected (issue 14 item 4; docs/operations.md).

``/metrics`` needs its token (or is served on an address of its own; without either,
only callers on this machine are answered), ``/docs``, ``/redoc`` and ``/openapi.json``
can be turned off, and the admin API refuses plain HTTP from other machines. The app is
the one ``pmsgate serve`` builds, on the booking-system emulator; the client's address
is set on the ASGI transport, and the reverse-proxy cases go through uvicorn's own
proxy-headers middleware, as ``pmsgate serve`` runs it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from pydantic import SecretStr, ValidationError
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from pmsgate.app import create_app, metrics_listener
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.gateway.vault import generate_key_spec
from tests.e2e.conftest import (
    ADMIN_TOKEN,
    SECRET_KEYS,
    Gateway,
    add_seeded_facility,
    gateway_settings,
    running_gateway,
)

pytestmark = pytest.mark.anyio

METRICS_TOKEN = "metrics-token-for-tests-0123456789"
LOCAL = ("127.0.0.1", 50000)
REMOTE = ("203.0.113.7", 50000)  # TEST-NET-3: another machine
PROXY = ("127.0.0.1", 50001)  # a reverse proxy on this machine, trusted by default
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def start(
    sqlite_url: str, kross_http: httpx.AsyncClient, clock: ManualClock
) -> Any:  # a factory of running gateways with the given settings
    @asynccontextmanager
    async def started(**overrides: Any) -> AsyncIterator[Gateway]:
        settings = gateway_settings(sqlite_url, **overrides)
        async with running_gateway(settings, kross_http, clock) as gateway:
            yield gateway

    return started


def client(
    gateway: Gateway,
    address: tuple[str, int],
    *,
    https: bool = False,
    behind_proxy: bool = False,
) -> httpx.AsyncClient:
    """A client of ``gateway`` calling from ``address`` (through a trusted-proxy check)."""
    app: Any = gateway.app
    if behind_proxy:  # as `pmsgate serve` runs it: PMSGATE_FORWARDED_ALLOW_IPS=127.0.0.1
        app = ProxyHeadersMiddleware(app, trusted_hosts="127.0.0.1")
    transport = httpx.ASGITransport(app=app, client=address)
    scheme = "https" if https else "http"
    return httpx.AsyncClient(transport=transport, base_url=f"{scheme}://gateway.test")


def code(response: httpx.Response) -> str:
    body = response.json()
    assert set(body["error"]) == {"code", "message", "hint"}
    found: str = body["error"]["code"]
    return found


# --- /metrics ---


async def test_without_a_token_metrics_answer_this_machine_only(start):
    async with start() as gateway:
        for address in (LOCAL, ("::1", 50000), ("::ffff:127.0.0.1", 50000)):
            async with client(gateway, address) as local:
                answer = await local.get("/metrics")
            assert answer.status_code == 200, (address, answer.text)
            assert "pmsgate_tool_calls" in answer.text
        async with client(gateway, REMOTE) as remote:
            refused = await remote.get("/metrics")
        assert refused.status_code == 403
        assert code(refused) == "metrics_not_public"
        assert "PMSGATE_METRICS_TOKEN" in refused.json()["error"]["hint"]
        assert "pmsgate_" not in refused.text


async def test_a_caller_behind_the_proxy_is_not_taken_for_a_local_one(start):
    async with start() as gateway, client(gateway, PROXY, behind_proxy=True) as proxied:
        answer = await proxied.get("/metrics", headers={"X-Forwarded-For": REMOTE[0]})
    assert answer.status_code == 403
    assert code(answer) == "metrics_not_public"


async def test_with_a_token_metrics_need_it_from_everywhere(start):
    async with start(metrics_token=SecretStr(METRICS_TOKEN)) as gateway:
        async with client(gateway, REMOTE) as remote:
            right = await remote.get(
                "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
            )
            wrong = await remote.get("/metrics", headers={"Authorization": "Bearer not-it"})
            prefix = await remote.get(
                "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN[:-1]}"}
            )
            other_scheme = await remote.get(
                "/metrics", headers={"Authorization": f"Basic {METRICS_TOKEN}"}
            )
            missing = await remote.get("/metrics")
        async with client(gateway, LOCAL) as local:
            local_missing = await local.get("/metrics")
    assert right.status_code == 200
    assert "pmsgate_tool_calls" in right.text
    for refused in (wrong, prefix, other_scheme, missing, local_missing):
        assert refused.status_code == 401
        assert code(refused) == "invalid_metrics_token"
        assert refused.headers["WWW-Authenticate"] == "Bearer"
        assert METRICS_TOKEN not in refused.text


async def test_with_an_address_of_their_own_metrics_are_not_on_the_main_app(start):
    async with start(metrics_address="127.0.0.1:9464") as gateway:
        for address in (LOCAL, REMOTE):
            async with client(gateway, address) as caller:
                answer = await caller.get("/metrics")
            assert answer.status_code == 404
            assert code(answer) == "not_found"


async def test_the_metrics_listener_serves_metrics_on_its_address_with_the_token(start):
    settings = gateway_settings(
        "sqlite+aiosqlite://",  # not opened: the listener reads the running gateway's services
        metrics_address="127.0.0.1:0",
        metrics_token=SecretStr(METRICS_TOKEN),
    )
    async with start() as gateway:
        services = gateway.services
        async with (
            metrics_listener(settings, lambda: services) as address,
            httpx.AsyncClient(base_url=f"http://{address}") as scraper,
        ):
            right = await scraper.get(
                "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
            )
            missing = await scraper.get("/metrics")
            elsewhere = await scraper.get("/v1/tools")
        assert right.status_code == 200
        assert "pmsgate_redis_up" in right.text
        assert missing.status_code == 401
        assert code(missing) == "invalid_metrics_token"
        assert elsewhere.status_code == 404  # nothing but /metrics there
        with pytest.raises(httpx.ConnectError):  # closed with the block
            await httpx.AsyncClient().get(f"http://{address}/metrics")


async def test_an_address_in_use_stops_the_metrics_listener_with_a_clear_error(start):
    settings = gateway_settings("sqlite+aiosqlite://", metrics_address="127.0.0.1:0")
    async with start() as gateway:
        services = gateway.services
        async with metrics_listener(settings, lambda: services) as address:
            taken = gateway_settings("sqlite+aiosqlite://", metrics_address=address)
            with pytest.raises(Exception, match="cannot listen on") as raised:
                async with metrics_listener(taken, lambda: services):
                    pass
    assert getattr(raised.value, "code", None) == "metrics_address_unavailable"


def test_a_short_metrics_token_or_a_malformed_address_is_refused_at_start_up():
    with pytest.raises(ValidationError, match="at least 16 characters"):
        Settings(metrics_token=SecretStr(""))
    for address in ("9464", "localhost", ":9464", "127.0.0.1:", "127.0.0.1:99999", "h:x"):
        with pytest.raises(ValidationError, match="expected host:port"):
            Settings(metrics_address=address)
    assert Settings(metrics_address="[::1]:9464").metrics_listen == ("::1", 9464)
    token = SecretStr(METRICS_TOKEN)
    assert Settings(metrics_address="0.0.0.0:9464", metrics_token=token).metrics_listen == (
        "0.0.0.0",
        9464,
    )
    assert Settings().metrics_listen is None


def test_a_metrics_address_beyond_this_machine_requires_the_token():
    # Any pod of a cluster reaches a pod's 0.0.0.0: the listener there is never anonymous.
    for address in ("0.0.0.0:9464", "[::]:9464", "10.0.0.5:9464", "gateway-1:9464"):
        with pytest.raises(ValidationError, match="set PMSGATE_METRICS_TOKEN too"):
            Settings(metrics_address=address)
        Settings(metrics_address=address, metrics_token=SecretStr(METRICS_TOKEN))
    for address in ("127.0.0.1:9464", "[::1]:9464", "localhost:9464", "127.0.0.2:0"):
        assert Settings(metrics_address=address).metrics_token is None


# --- /docs, /redoc, /openapi.json ---


async def test_the_api_documentation_is_served_by_default(start):
    async with start() as gateway, client(gateway, REMOTE) as caller:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert (await caller.get(path)).status_code == 200, path
        assert "/admin/facilities" in (await caller.get("/openapi.json")).json()["paths"]


async def test_the_api_documentation_can_be_turned_off(start):
    async with start(api_docs=False) as gateway, client(gateway, LOCAL) as caller:
        for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
            answer = await caller.get(path)
            assert answer.status_code == 404, path
            assert code(answer) == "not_found"
        assert (await caller.get("/healthz")).status_code == 200  # the rest still answers


# --- the admin API over plain HTTP ---


async def test_the_admin_api_refuses_plain_http_from_another_machine(start):
    async with start() as gateway, client(gateway, REMOTE) as remote:
        with_token = await remote.get("/admin/facilities", headers=ADMIN)
        without = await remote.get("/admin/facilities")
    for refused in (with_token, without):  # checked before the token
        assert refused.status_code == 403
        assert code(refused) == "admin_https_required"
        assert "PMSGATE_ADMIN_ALLOW_PLAIN_HTTP" in refused.json()["error"]["hint"]


async def test_the_admin_api_answers_https_and_this_machine(start):
    async with start() as gateway:
        async with client(gateway, REMOTE, https=True) as over_https:
            answer = await over_https.get("/admin/facilities", headers=ADMIN)
            assert answer.status_code == 200, answer.text
            assert code(await over_https.get("/admin/facilities")) == "invalid_admin_token"
        for address in (LOCAL, ("::1", 50000)):
            async with client(gateway, address) as local:
                answer = await local.get("/admin/facilities", headers=ADMIN)
            assert answer.status_code == 200, (address, answer.text)


async def test_plain_http_to_the_admin_api_can_be_allowed(start):
    async with (
        start(admin_allow_plain_http=True) as gateway,
        client(gateway, REMOTE) as remote,
    ):
        answer = await remote.get("/admin/facilities", headers=ADMIN)
    assert answer.status_code == 200, answer.text


async def test_behind_a_trusted_proxy_its_forwarded_scheme_decides(start):
    async with start() as gateway, client(gateway, PROXY, behind_proxy=True) as proxied:
        forwarded = {"X-Forwarded-For": REMOTE[0], **ADMIN}
        over_https = await proxied.get(
            "/admin/facilities", headers={**forwarded, "X-Forwarded-Proto": "https"}
        )
        over_http = await proxied.get(
            "/admin/facilities", headers={**forwarded, "X-Forwarded-Proto": "http"}
        )
    assert over_https.status_code == 200, over_https.text
    assert over_http.status_code == 403
    assert code(over_http) == "admin_https_required"


async def test_forwarded_headers_from_an_untrusted_address_are_ignored(start):
    elsewhere = ("198.51.100.9", 50000)  # not in PMSGATE_FORWARDED_ALLOW_IPS
    async with start() as gateway, client(gateway, elsewhere, behind_proxy=True) as spoofer:
        claimed = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "127.0.0.1", **ADMIN}
        admin = await spoofer.get("/admin/facilities", headers=claimed)
        metrics = await spoofer.get("/metrics", headers=claimed)
    assert admin.status_code == 403
    assert code(admin) == "admin_https_required"
    assert metrics.status_code == 403
    assert code(metrics) == "metrics_not_public"


# --- /readyz: not ready only when this replica cannot serve (docs/operations.md) ---


async def test_readyz_is_ready_when_the_vault_keys_read_the_stored_secrets(start, kross_store):
    async with start() as gateway:
        await add_seeded_facility(gateway.services, kross_store)
        ready = await gateway.http.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "checks": {"database": "ok", "vault": "ok"}}


async def test_a_replica_without_the_key_of_the_stored_secrets_is_not_ready_and_says_which(
    start, kross_store
):
    async with start() as gateway:  # key "t1" encrypts the facility's credentials
        await add_seeded_facility(gateway.services, kross_store)
    new_key = generate_key_spec("t2")
    async with start(secret_keys=SecretStr(new_key)) as gateway:  # "t1" left out
        refused = await gateway.http.get("/readyz")
        a_call = await gateway.http.get("/healthz")
    assert refused.status_code == 503
    assert code(refused) == "not_ready"
    assert "'t1'" in refused.json()["checks"]["vault"]
    assert "'t1'" in refused.json()["error"]["message"]
    assert refused.headers["Retry-After"] == "5"
    assert a_call.status_code == 200  # alive: a restart would not help, a fixed setting does
    async with start(secret_keys=SecretStr(f"{new_key},{SECRET_KEYS}")) as gateway:
        assert (await gateway.http.get("/readyz")).status_code == 200  # "t1" back, after "t2"


async def test_the_vault_check_is_cached_and_not_repeated_on_every_probe(
    start, kross_store, clock: ManualClock
):
    async with start() as gateway:
        assert (await gateway.http.get("/readyz")).status_code == 200  # nothing stored yet
        # Meanwhile another replica, configured with a key this one lacks, stores a secret.
        async with start(secret_keys=SecretStr(generate_key_spec("t9"))) as other:
            await add_seeded_facility(other.services, kross_store)
        assert (await gateway.http.get("/readyz")).status_code == 200  # the cached answer
        clock.advance(300)
        late = await gateway.http.get("/readyz")
    assert late.status_code == 503
    assert "'t9'" in late.json()["checks"]["vault"]


async def test_a_replica_that_is_shutting_down_is_not_ready(
    sqlite_url: str, kross_http: httpx.AsyncClient, clock: ManualClock
):
    settings = gateway_settings(sqlite_url)
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        app = create_app(settings, container=container)
        async with app.router.lifespan_context(app):
            pass  # started, then the shutdown began
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
            answer = await http.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["checks"]["lifecycle"] == "shutting down"
