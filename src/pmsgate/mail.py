"""Sending e-mail: through the configured SMTP server, or into the outbox directory.

One mechanism for every message pmsgate sends (the onboarding message of step 16, the
incident notices of :mod:`pmsgate.jobs.notify`): when ``PMSGATE_SMTP_URL`` is set the
message goes through that server (``smtp://`` with STARTTLS when offered, ``smtps://``),
and either way a copy is written to ``<data_dir>/outbox/`` as the record of what was
sent (with ``X-Pmsgate-Transport: smtp`` or ``outbox``). Without a server the file *is*
the delivery: an operator (or a test) reads it there.

A failure is :class:`MailNotSent` (``smtp_failed``) naming only the exception's type: an
SMTP error can quote the login exchange, so its text is never shown or logged.
"""

from __future__ import annotations

import re
import smtplib
import ssl
from email.message import EmailMessage
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

import anyio

from pmsgate.config import Settings
from pmsgate.errors import ConfigurationError, PmsgateError

Transport = Literal["smtp", "outbox"]
TRANSPORT_HEADER = "X-Pmsgate-Transport"
SMTP_TIMEOUT_S = 30
_NOT_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


class MailNotSent(PmsgateError):
    """The SMTP server could not be reached or refused the message."""

    code = "smtp_failed"
    status = 502
    hint = "Check PMSGATE_SMTP_URL and that the mail server is reachable."


def outbox_dir(settings: Settings) -> Path:
    """The directory where every message sent (or to be picked up) is recorded."""
    return settings.data_dir / "outbox"


def safe_filename(value: str, fallback: str = "message") -> str:
    """``value`` as a file name: letters, digits, ``.``, ``_`` and ``-`` only."""
    return _NOT_FILENAME.sub("_", value).strip("._") or fallback


def smtp_url(settings: Settings) -> str | None:
    """The configured SMTP server's URL, or None when messages go to the outbox only."""
    if settings.smtp_url is None:
        return None
    value = settings.smtp_url.get_secret_value().strip()
    return value or None


def send_smtp(url: str, message: EmailMessage, *, timeout_s: float = SMTP_TIMEOUT_S) -> None:
    """Send through the SMTP server of ``url`` (smtp:// with STARTTLS when offered, smtps://)."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    context = ssl.create_default_context()
    client: smtplib.SMTP
    if parts.scheme == "smtps":
        client = smtplib.SMTP_SSL(host, parts.port or 465, timeout=timeout_s, context=context)
    elif parts.scheme == "smtp":
        client = smtplib.SMTP(host, parts.port or 587, timeout=timeout_s)
    else:
        raise ConfigurationError(
            "PMSGATE_SMTP_URL must start with smtp:// or smtps://.",
            code="invalid_smtp_url",
            hint="e.g. smtp://user:password@mail.example.com:587",
        )
    with client:
        if parts.scheme == "smtp":
            client.ehlo()
            if client.has_extn("starttls"):
                client.starttls(context=context)
                client.ehlo()
        if parts.username:
            client.login(unquote(parts.username), unquote(parts.password or ""))
        client.send_message(message)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_bytes(data)
    partial.replace(path)


async def deliver(
    settings: Settings, message: EmailMessage, record: Path, *, what: str = "The message"
) -> Transport:
    """Send ``message`` by SMTP when configured, then record it at ``record``; the transport.

    ``what`` names the message in the error (``"The onboarding message"``).
    """
    url = smtp_url(settings)
    transport: Transport = "outbox"
    if url is not None:
        try:
            await anyio.to_thread.run_sync(send_smtp, url, message)
        except (OSError, smtplib.SMTPException) as error:
            # The type only: an SMTP error can quote the login exchange.
            raise MailNotSent(f"{what} could not be sent ({type(error).__name__}).") from None
        transport = "smtp"
    del message[TRANSPORT_HEADER]
    message[TRANSPORT_HEADER] = transport
    await anyio.to_thread.run_sync(write_atomically, record, message.as_bytes())
    return transport
