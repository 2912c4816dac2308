"""Subscriptions through the console and the CLI: the secret shown once and stored only
sealed, a customer's own only, the team's for admins, bad input refused with a 4xx,
everything audited; the receiver URL's rules."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from structlog.testing import capture_logs

from pmsgate.audit.actions import AuditAction
from pmsgate.errors import InvalidInput
from pmsgate.storage.audit import AuditFilter
from pmsgate.webhooks.service import check_url
from tests.cli_support import assert_failed_with, pmsgate
from tests.gateway.facility_support import all_stored_text
from tests.support.cli import database_cli
from tests.web.support import csrf, form_token_of
from tests.webhooks.support import ADMIN, receiver, webhook_sandbox

pytestmark = pytest.mark.anyio

PAGE = "/console/webhooks"


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hook",  # not https
        "https://user:pw@example.com/hook",  # credentials in the URL
        "https://10.0.0.5/hook",  # private
        "https://169.254.169.254/latest",  # link-local (cloud metadata)
        "https://127.0.0.1/hook",  # loopback, not allowed here
        "https://localhost/hook",
        "https://example.com/hook#part",
        "ftp://example.com/",
        "https:///nohost",
        "https://exa mple.com/",
        "",
    ],
)
def test_a_receiver_url_must_be_public_https(url: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_url(url, allow_loopback_http=False)
    assert refused.value.code == "invalid_webhook_url"


def test_loopback_http_is_allowed_only_when_configured() -> None:
    assert check_url("https://hooks.example.com/a?b=1", allow_loopback_http=False)
    assert check_url("http://127.0.0.1:8080/hook", allow_loopback_http=True)
    assert check_url("http://[::1]:8080/hook", allow_loopback_http=True)
    with pytest.raises(InvalidInput):
        check_url("http://10.0.0.1/hook", allow_loopback_http=True)


async def _subscribe_on_page(
    client: httpx.AsyncClient, token: str, url: str, *events: str
) -> httpx.Response:
    form = await form_token_of(client, PAGE, "webhook-subscribe-form")
    return await client.post(
        PAGE,
        data={"csrf_token": token, "form_token": form, "url": url, "events": list(events)},
    )


async def test_a_customer_subscribes_on_the_console_and_sees_the_secret_once(
    database_url: str,
):
    with receiver() as hook:
        async with webhook_sandbox(database_url) as web:
            client, token = await web.signed_in("customer")
            page = await client.get(PAGE, headers={"Accept-Language": "it"})
            assert page.status_code == 200
            assert "Aggiungi un webhook" in page.text  # the customer's Italian

            with capture_logs() as logs:
                form = await form_token_of(client, PAGE, "webhook-subscribe-form")
                fields = {
                    "csrf_token": token,
                    "form_token": form,
                    "url": hook.url,
                    "events": ["facility.connection_lost"],
                }
                sent = await client.post(PAGE, data=fields)
                assert sent.status_code == 303
                shown = await client.get(sent.headers["location"])
            secret = shown.text.split('data-testid="webhook-secret-value">')[1].split("<")[0]
            assert secret.startswith("whsec_")
            assert secret not in sent.headers["location"]
            again = await client.get(sent.headers["location"])  # shown once
            assert secret not in again.text and "webhook-secret-value" not in again.text
            repeated = await client.post(PAGE, data=fields)  # the same form: nothing again
            assert "repeated=1" in repeated.headers["location"]
            [mine] = await web.web.webhooks.subscriptions(web.student_id)
            assert mine.url == hook.url

            # Never stored, logged or audited in clear.
            assert secret not in await all_stored_text(database_url)
            assert secret not in repr(logs)
            events = [e async for e in web.web.audit.export(AuditFilter(action_prefix="webhook."))]
            assert [e.action for e in events] == ["webhook.subscribed"]
            assert secret not in json.dumps([e.as_json() for e in events])

            # Rotation on the page: a new secret, shown once too.
            rotate_form = await form_token_of(client, PAGE, "webhook-rotate-form")
            rotated = await client.post(
                f"{PAGE}/{mine.id}/rotate", data={"csrf_token": token, "form_token": rotate_form}
            )
            new_page = await client.get(rotated.headers["location"])
            new = new_page.text.split('data-testid="webhook-secret-value">')[1].split("<")[0]
            assert new.startswith("whsec_") and new != secret
            assert new not in await all_stored_text(database_url)

            # The delivery log and replay on the page.
            await web.gateway.facilities.mark_error(web.hotel_id, "refused")
            await web.web.webhook_deliverer.run()
            log_page = await client.get(PAGE)
            assert 'data-status="delivered"' in log_page.text
            [delivery] = await web.web.webhooks.deliveries(web.student_id)
            replayed = await client.post(
                f"{PAGE}/deliveries/{delivery.id}/replay", headers=csrf(token)
            )
            assert replayed.status_code == 303
            await web.web.webhook_deliverer.run()
            assert len(hook.requests) == 2
            assert hook.ids()[0] == hook.ids()[1]


async def test_a_customer_reaches_only_its_own_and_bad_input_is_a_4xx(database_url: str):
    async with webhook_sandbox(database_url) as web:
        other = await web.second_customer()
        theirs = await web.web.webhooks.subscribe(
            other, "https://hooks.example.com/a", ["onboarding.completed"], actor=ADMIN
        )
        team = await web.web.webhooks.subscribe(
            None, "https://team.example.com/a", ["onboarding.completed"], actor=ADMIN
        )
        client, token = await web.signed_in("customer")
        page = await client.get(PAGE)
        assert "hooks.example.com" not in page.text and "team.example.com" not in page.text
        for target in (theirs.subscription.id, team.subscription.id):
            refused = await client.post(
                f"{PAGE}/{target}/remove", data={"csrf_token": token, "confirm": "yes"}
            )
            assert refused.status_code == 404
        assert len(await web.web.webhooks.subscriptions("*")) == 2

        bad = await _subscribe_on_page(client, token, "http://example.com/x", "nope")
        assert bad.status_code == 422
        assert 'data-testid="webhook-error"' in bad.text

        admin, admin_token = await web.signed_in("admin")
        everything = await admin.get(PAGE)
        assert "hooks.example.com" in everything.text and "team.example.com" in everything.text
        removed = await admin.post(
            f"{PAGE}/{theirs.subscription.id}/remove",
            data={"csrf_token": admin_token, "confirm": "yes"},
        )
        assert removed.status_code == 303
        assert [s.id for s in await web.web.webhooks.subscriptions("*")] == [team.subscription.id]
        [removal] = [
            e async for e in web.web.audit.export(AuditFilter(action_prefix="webhook.removed"))
        ]
        assert removal.action == AuditAction.WEBHOOK_REMOVED.value


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with database_cli(monkeypatch, database_url, "w1") as url:
        yield url


async def test_the_cli_adds_lists_rotates_and_removes(cli_env: str):
    added = await pmsgate(
        "webhooks", "add", "https://team.example.com/hook", "--team", "-e", "onboarding.completed"
    )
    assert added.exit_code == 0, added.stderr
    secret = added.stdout.strip()
    assert secret.startswith("whsec_") and secret not in added.stderr

    listed = await pmsgate("webhooks", "list", "--json")
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (row["url"], row["student_id"], row["events"]) == (
        "https://team.example.com/hook",
        None,
        ["onboarding.completed"],
    )
    assert secret not in listed.stdout

    rotated = await pmsgate("webhooks", "rotate", str(row["id"]), "--overlap", "60")
    assert rotated.exit_code == 0, rotated.stderr
    assert rotated.stdout.strip().startswith("whsec_") and rotated.stdout.strip() != secret

    deliveries = await pmsgate("webhooks", "deliveries", "--json")
    assert deliveries.exit_code == 0 and deliveries.stdout == ""
    assert_failed_with(await pmsgate("webhooks", "replay", "99"), "webhook_delivery_not_found")
    assert_failed_with(
        await pmsgate("webhooks", "add", "http://x.example.com", "--team", "-e", "x"),
        "invalid_webhook_url",
    )
    assert_failed_with(
        await pmsgate(
            "webhooks",
            "add",
            "https://a.example.com",
            "--customer",
            "nobody",
            "-e",
            "onboarding.completed",
        ),
        "customer_not_found",
    )
    assert (await pmsgate("webhooks", "remove", str(row["id"]))).exit_code == 0
    assert (await pmsgate("webhooks", "list", "--json")).stdout == ""
    stored = await all_stored_text(cli_env)
    assert secret not in stored and rotated.stdout.strip() not in stored
