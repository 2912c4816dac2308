"""Standard Webhooks signatures: the secret format and the three ``webhook-*`` headers.

A secret reads ``whsec_<base64 of 32 random bytes>``. A message is signed as
``v1,<base64 of HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>`` by the
``standardwebhooks`` library; during a rotation every live secret signs, and the header
lists the signatures separated by spaces (a receiver accepts any one it can verify).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from datetime import datetime

from standardwebhooks.webhooks import Webhook

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    """A new signing secret, ``whsec_`` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def signature_header(
    signing_secrets: Sequence[str], message_id: str, timestamp: datetime, body: str
) -> str:
    """The ``webhook-signature`` value: one ``v1,…`` signature per secret, space-separated."""
    return " ".join(Webhook(secret).sign(message_id, timestamp, body) for secret in signing_secrets)


def signed_headers(
    signing_secrets: Sequence[str], message_id: str, timestamp: datetime, body: str
) -> dict[str, str]:
    """The headers of one delivery attempt: id, timestamp (Unix seconds), signatures."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": signature_header(signing_secrets, message_id, timestamp, body),
        "content-type": "application/json",
    }
