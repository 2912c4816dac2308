"""The receiver of docs/webhooks.md (examples/webhook_receiver.py) verifies a real delivery,
handles a replay once, and refuses a tampered body, another secret and an old timestamp."""

from __future__ import annotations

import importlib.util
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pmsgate.webhooks.signing import new_secret, signed_headers
from tests.webhooks.support import ADMIN, webhook_sandbox

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "webhook_receiver.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("webhook_receiver", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_example_receiver_verifies_a_real_delivery_once(database_url: str):
    example = load_example()
    async with webhook_sandbox(database_url, real_time=True) as web:
        got: list[tuple[str, dict[str, Any]]] = []
        server = example.make_server("", lambda *event: got.append(event), port=0)
        url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
        created = await web.web.webhooks.subscribe(
            web.student_id, url, ["facility.connection_lost"], actor=ADMIN
        )
        server.secrets = [created.secret]  # what the receiver's operator configures
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            await web.gateway.facilities.mark_error(web.hotel_id, "password changed")
            assert (await web.web.webhook_deliverer.run())["delivered"] == 1
            [delivery] = await web.web.webhooks.deliveries(web.student_id)
            await web.web.webhooks.replay(delivery.id, web.student_id, actor=ADMIN)
            assert (await web.web.webhook_deliverer.run())["delivered"] == 1  # acknowledged
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
        [(message_id, event)] = got  # the replay was not handled twice
        assert message_id == delivery.event_id
        assert event["type"] == "facility.connection_lost"
        assert event["data"]["hotel_id"] == web.hotel_id


def test_the_example_refuses_what_is_not_a_genuine_fresh_delivery() -> None:
    example = load_example()
    secret, body = new_secret(), '{"type":"onboarding.completed","data":{}}'
    now = datetime.now(UTC)
    headers = signed_headers([secret], "msg_1", now, body)
    assert example.verify(secret, headers, body.encode())["type"] == "onboarding.completed"
    with pytest.raises(example.InvalidSignature):
        example.verify(secret, headers, body.replace("onboarding", "evil").encode())
    with pytest.raises(example.InvalidSignature):
        example.verify(new_secret(), headers, body.encode())
    with pytest.raises(example.InvalidSignature):
        example.verify(secret, headers, body.encode(), now=now.timestamp() + 301)
