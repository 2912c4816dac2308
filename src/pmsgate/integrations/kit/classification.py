"""Error classification as data: (HTTP status, upstream error code, context) → error kind.

Each upstream has a table (YAML shipped next to its client, e.g.
``integrations/kross/errors.yaml``).
Rules are tried in order and the **first match wins**; a rule matches when every
condition it states holds:

- ``status``: HTTP statuses, exact (``401``) or a class (``"4xx"``, ``"5xx"``);
- ``codes``: upstream error codes, compared case-insensitively as text (``1001`` and
  ``"1001"`` are the same code); ``"*"`` means "any error code at all";
- ``context``: where the request was, e.g. ``token_request`` for a login, so that the
  same answer can mean "wrong password" on a login and "bad token" elsewhere.

A deployment that meets a new spelling of an old failure adds a line to the table,
not a branch to the code.

The same file describes the upstream's error classes (``classes:``): for each class name,
its stable ``code``, the ``hint`` for a person, whether it is ``retryable`` and whether a
failure of it may have been ``sent`` (applied upstream) unless the client knows better.
A value left out is the parent class's (see :class:`~pmsgate.integrations.kit.UpstreamError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_STATUS_CLASS = re.compile(r"^[1-5]xx$")
ANY_CODE = "*"


class ErrorKind(StrEnum):
    """What a failed answer means, whatever the upstream's own spelling."""

    AUTH_FAILED = "auth_failed"
    TOKEN_REJECTED = "token_rejected"
    FORBIDDEN = "forbidden"
    EDGE_BLOCKED = "edge_blocked"
    UNKNOWN_OPERATION = "unknown_operation"
    NOT_FOUND = "not_found"
    INVALID_REQUEST = "invalid_request"
    CONFLICT = "conflict"
    RATE_LIMITED = "rate_limited"
    TOO_MANY_SESSIONS = "too_many_sessions"
    UNAVAILABLE = "unavailable"
    UNEXPECTED = "unexpected"


@dataclass(frozen=True, slots=True)
class Rule:
    """One line of a classification table; ``None`` conditions match anything."""

    kind: ErrorKind
    statuses: frozenset[int | str] | None = None
    codes: frozenset[str] | None = None
    contexts: frozenset[str] | None = None

    def matches(self, status: int | None, code: str | None, context: str) -> bool:
        """True when every condition of the rule holds for this answer."""
        if self.contexts is not None and context not in self.contexts:
            return False
        if self.statuses is not None and not _status_matches(self.statuses, status):
            return False
        if self.codes is not None:
            if code is None or code == "":
                return False
            if ANY_CODE not in self.codes and code.casefold() not in self.codes:
                return False
        return True


@dataclass(frozen=True, slots=True)
class ErrorClass:
    """What an upstream's errors.yaml says of one error class; ``None`` keeps the parent's."""

    code: str | None = None
    hint: str | None = None
    retryable: bool | None = None
    sent: bool | None = None

    def attributes(self) -> dict[str, Any]:
        """The class attributes it sets (``sent`` is ``sent_by_default``), the others kept."""
        named = {
            "code": self.code,
            "hint": self.hint,
            "retryable": self.retryable,
            "sent_by_default": self.sent,
        }
        return {name: value for name, value in named.items() if value is not None}


class ClassificationTable:
    """An upstream's ordered rules; :meth:`classify` names the kind of a failed answer."""

    def __init__(
        self,
        name: str,
        rules: Sequence[Rule],
        default: ErrorKind,
        classes: Mapping[str, ErrorClass] | None = None,
        kinds: Mapping[ErrorKind, str] | None = None,
    ) -> None:
        self.name = name
        self.rules = tuple(rules)
        self.default = default
        # The upstream's error classes by class name, and the class name of each kind.
        self.classes: Mapping[str, ErrorClass] = dict(classes or {})
        self.kinds: Mapping[ErrorKind, str] = dict(kinds or {})

    def classify(self, status: int | None, code: object = None, *, context: str = "") -> ErrorKind:
        """The kind of the first rule that matches, else the table's default."""
        text = _code_text(code)
        for rule in self.rules:
            if rule.matches(status, text, context):
                return rule.kind
        return self.default

    def __repr__(self) -> str:
        return f"ClassificationTable({self.name!r}, {len(self.rules)} rules)"

    @classmethod
    def from_data(cls, name: str, data: Any) -> ClassificationTable:
        """A table from its parsed YAML (``{default, rules: [...]}``)."""
        try:
            spec = _TableSpec.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"{name}: malformed classification table ({exc})") from None
        classes = {name: ErrorClass(**c.model_dump()) for name, c in spec.classes.items()}
        return cls(name, [r.to_rule() for r in spec.rules], spec.default, classes, spec.kinds)

    @classmethod
    def load(cls, package: str, resource: str) -> ClassificationTable:
        """The table shipped as ``resource`` inside ``package``."""
        text = resources.files(package).joinpath(resource).read_text("utf-8")
        return cls.from_data(f"{package}/{resource}", yaml.safe_load(text))


def _code_text(code: object) -> str | None:
    if code is None or isinstance(code, bool):
        return None
    if isinstance(code, float) and code.is_integer():
        # 401 and 401.0 are the same code (JSON numbers may come back as floats).
        code = int(code)
    if isinstance(code, int | float | str):
        text = str(code).strip()
        return text.casefold() or None
    return None


def _status_matches(statuses: frozenset[int | str], status: int | None) -> bool:
    if status is None:
        return False
    return status in statuses or f"{status // 100}xx" in statuses


class _RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: ErrorKind
    status: list[int | str] | None = None
    codes: list[int | str] | None = None
    context: list[str] | None = None

    @field_validator("status")
    @classmethod
    def _statuses(cls, value: list[int | str] | None) -> list[int | str] | None:
        for item in value or []:
            if isinstance(item, str) and not _STATUS_CLASS.match(item):
                raise ValueError(f"status {item!r} is neither a number nor a class like '4xx'")
        return value

    def to_rule(self) -> Rule:
        return Rule(
            kind=self.kind,
            statuses=_frozen(self.status),
            codes=_frozen(None if self.codes is None else [str(c).casefold() for c in self.codes]),
            contexts=_frozen(self.context),
        )


class _ClassSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str | None = None
    hint: str | None = None
    retryable: bool | None = None
    sent: bool | None = None


class _TableSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default: ErrorKind = ErrorKind.UNEXPECTED
    rules: list[_RuleSpec] = Field(min_length=1)
    classes: dict[str, _ClassSpec] = Field(default_factory=dict)
    kinds: dict[ErrorKind, str] = Field(default_factory=dict)


def _frozen(values: Iterable[Any] | None) -> frozenset[Any] | None:
    return None if values is None else frozenset(values)
