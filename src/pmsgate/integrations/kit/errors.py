"""The root of every failure talking to an upstream system.

An :class:`UpstreamError` describes the upstream, not the caller's problem: it is
deliberately not a :class:`pmsgate.errors.PmsgateError`. The gateway, onboarding and
the knowledge sync each decide what to tell their own users (errors translate
at one boundary: docs/requirements.md R10.2). Messages are written by us and never contain a token,
password or secret value; the upstream's own text is kept apart, scrubbed and cut
short, in ``upstream_message``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pmsgate.integrations.kit.classification import ClassificationTable, ErrorKind

# What :meth:`UpstreamError.as_dict` reports, in this order (nothing secret is in them).
_REPORTED = (
    "upstream",
    "code",
    "operation",
    "status",
    "upstream_code",
    "request_id",
    "retryable",
    "may_have_been_sent",
)


class UpstreamError(Exception):
    """A failure of one request to an upstream system.

    Class attributes say what a kind of failure *is*: a stable ``code``, whether the
    same request may succeed later (``retryable``), a ``hint`` for a person and whether
    a failure of the kind may have been applied upstream (``sent_by_default``).
    A family's root names its upstream's table (``class KrossError(UpstreamError,
    table=CLASSIFICATION)``); then every class of the family takes these attributes from
    the ``classes:`` of that errors.yaml, by class name (a value left out is the parent's),
    and :meth:`for_kind` names the class of each kind (its ``kinds:``).
    Instance fields say what *happened*: the ``operation`` (an operation name or
    ``METHOD /path``), the HTTP ``status``, the upstream's own ``upstream_code`` and
    (scrubbed) ``upstream_message``, its ``request_id``, ``retry_after`` seconds when
    the upstream said when to come back, and ``may_have_been_sent``: False only when it is
    certain that no byte reached the server or that the server refused it unprocessed
    (so even a write may be repeated); by default the class's ``sent_by_default``.
    """

    upstream: ClassVar[str] = "upstream"
    code: ClassVar[str] = "upstream_error"
    retryable: ClassVar[bool] = False
    sent_by_default: ClassVar[bool] = True
    hint: str = "See the docs/ page of this upstream for its contract."
    # What ``repr`` shows, in this order.
    repr_fields: ClassVar[tuple[str, ...]] = (
        "code",
        "operation",
        "status",
        "upstream_code",
        "request_id",
    )
    # The family's errors.yaml (None: no family) and its classes by name, set on its root.
    _table: ClassVar[ClassificationTable | None] = None
    _family: ClassVar[dict[str, type[UpstreamError]]] = {}

    def __init_subclass__(cls, *, table: ClassificationTable | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if table is not None:
            cls._table, cls._family = table, {}
        if cls._table is None:
            return
        described = cls._table.classes.get(cls.__name__)
        if described is None:
            raise TypeError(f"{cls.__name__} is not among the classes of its errors.yaml")
        for name, value in described.attributes().items():
            setattr(cls, name, value)
        cls._family[cls.__name__] = cls

    @classmethod
    def for_kind(cls, kind: ErrorKind) -> type[Self]:
        """The family's class of a failure of ``kind`` (the ``kinds:`` of its errors.yaml)."""
        if cls._table is None or kind not in cls._table.kinds:
            raise LookupError(f"{cls.__name__}: no class for the kind {kind.value!r}")
        found = cls._family[cls._table.kinds[kind]]
        if not issubclass(found, cls):
            raise LookupError(f"{found.__name__} is not a {cls.__name__}")
        return found

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
        may_have_been_sent: bool | None = None,
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
        self.may_have_been_sent = (
            self.sent_by_default if may_have_been_sent is None else may_have_been_sent
        )
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.repr_fields)
        return f"{type(self).__name__}({fields})"

    def as_dict(self) -> dict[str, Any]:
        """The failure's fields for a log line or a report (nothing secret is in them)."""
        return {name: getattr(self, name) for name in _REPORTED}
