"""The root of every failure talking to an upstream system.

An :class:`UpstreamError` describes the upstream, not the caller's problem: it is
deliberately not a :class:`pmsgate.errors.PmsgateError`. The gateway, onboarding and
the knowledge sync each decide what to tell their own users (errors translate
at one boundary: docs/requirements.md R10.2). Messages are written by us and never contain a token,
password or secret value; the upstream's own text is kept apart, scrubbed and cut
short, in ``upstream_message``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class UpstreamError(Exception):
    """A failure of one request to an upstream system.

    Class attributes say what a kind of failure *is*: a stable ``code``, whether the
    same request may succeed later (``retryable``) and a ``hint`` for a person.
    Instance fields say what *happened*: the ``operation`` (an operation name or
    ``METHOD /path``), the HTTP ``status``, the upstream's own ``upstream_code`` and
    (scrubbed) ``upstream_message``, its ``request_id``, ``retry_after`` seconds when
    the upstream said when to come back, and ``may_have_been_sent``: False only when
    it is certain that no byte reached the server (so even a write may be repeated).
    """

    upstream: ClassVar[str] = "upstream"
    code: ClassVar[str] = "upstream_error"
    retryable: ClassVar[bool] = False
    hint: str = "See the docs/ page of this upstream for its contract."

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        status: int | None = None,
        upstream_code: str | None = None,
        upstream_message: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        may_have_been_sent: bool = True,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.operation = operation
        self.status = status
        self.upstream_code = upstream_code
        self.upstream_message = upstream_message
        self.request_id = request_id
        self.retry_after = retry_after
        self.may_have_been_sent = may_have_been_sent
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, operation={self.operation!r}, "
            f"status={self.status!r}, upstream_code={self.upstream_code!r}, "
            f"request_id={self.request_id!r})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The failure's fields for a log line or a report (nothing secret is in them)."""
        return {
            "upstream": self.upstream,
            "code": self.code,
            "operation": self.operation,
            "status": self.status,
            "upstream_code": self.upstream_code,
            "request_id": self.request_id,
            "retryable": self.retryable,
            "may_have_been_sent": self.may_have_been_sent,
        }
