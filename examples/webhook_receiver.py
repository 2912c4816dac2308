"""A receiver of pmsgate's signed event webhooks, with nothing but the standard library.

Run it with the subscription's secret (shown once when the subscription was created)::

    WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py --port 8000

Each POST is checked as the Standard Webhooks specification says (docs/webhooks.md):
the ``webhook-signature`` header lists one or more ``v1,<base64>`` signatures, each the
HMAC-SHA256, keyed with the base64-decoded part of the secret after ``whsec_``, of
``<webhook-id>.<webhook-timestamp>.<body>``; one match is enough (during a secret's
rotation two are sent). A timestamp more than five minutes away is refused (a replayed
capture), and an id already seen is acknowledged without being handled again.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOLERANCE_S = 300


class InvalidSignature(Exception):
    """The request is not a genuine, fresh delivery signed with our secret."""


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float | None = None,
    tolerance_s: float = TOLERANCE_S,
) -> dict[str, Any]:
    """The event a signed request carries; :class:`InvalidSignature` when it is not one."""
    lowered = {name.lower(): value for name, value in headers.items()}
    message_id = lowered.get("webhook-id", "")
    timestamp = lowered.get("webhook-timestamp", "")
    signatures = lowered.get("webhook-signature", "")
    if not (message_id and timestamp.isdigit() and signatures):
        raise InvalidSignature("missing webhook-id, webhook-timestamp or webhook-signature")
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance_s:
        raise InvalidSignature("timestamp too old or too new")
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{message_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for candidate in signatures.split(" "):
        version, _, signature = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            event: dict[str, Any] = json.loads(body)
            return event
    raise InvalidSignature("no matching signature")


class Receiver(ThreadingHTTPServer):
    """The HTTP server; ``secrets`` are those accepted (two while a rotation overlaps)."""

    secrets: list[str]


def make_server(
    secret: str,
    on_event: Callable[[str, dict[str, Any]], None],
    host: str = "127.0.0.1",
    port: int = 8000,
) -> Receiver:
    """An HTTP server calling ``on_event(webhook_id, event)`` once per genuine event."""
    seen: set[str] = set()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        server: Receiver

        def do_POST(self) -> None:  # the standard library names it
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                event = _verify_any(self.server.secrets, dict(self.headers.items()), body)
            except InvalidSignature:
                self.send_response(401)
            else:
                message_id = self.headers["webhook-id"]
                with lock:
                    first = message_id not in seen
                    seen.add(message_id)
                if first:  # a retry or a replay of one already handled: acknowledged only
                    on_event(message_id, event)
                self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = Receiver((host, port), Handler)
    server.secrets = [secret]
    return server


def _verify_any(secrets: list[str], headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """The event, verified with the first of ``secrets`` that signed it."""
    for secret in secrets:
        try:
            return verify(secret, headers, body)
        except InvalidSignature:
            continue
    raise InvalidSignature("no secret verifies it")


def main() -> None:
    """Listen and print each event (type, id, data) as it comes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    options = parser.parse_args()

    def show(message_id: str, event: dict[str, Any]) -> None:
        print(event["type"], message_id, json.dumps(event["data"]), flush=True)

    server = make_server(os.environ["WEBHOOK_SECRET"], show, options.host, options.port)
    print(f"listening on http://{options.host}:{options.port}/", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
