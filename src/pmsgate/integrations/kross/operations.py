"""The booking-system operation table: which operations exist, where they live, what they do.

The table is data (``operations.yaml``, shipped inside the package) so that a
deployment can move an operation to another path (``PMSGATE_KROSS_PATHS``)
without code changes (docs/kross-api.md: some integrations see the
read operations under ``reservations/``). Resolving a name is the gate every
request passes: operations that do not exist or are out of scope are refused
here, before anything is sent.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pmsgate.errors import ConfigurationError
from pmsgate.integrations.kross.errors import OutOfScopeOperation, UnknownOperation

OPERATIONS_RESOURCE = "operations.yaml"

# Lower-case segments separated by single slashes: no leading slash, no "..", no query.
_PATH_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*(/[a-z0-9][a-z0-9_-]*)*$")
# The human reference page (/apiv5) and a doubled version prefix are never operation paths.
_VERSION_SEGMENTS = frozenset({"v5", "apiv5"})


class InvalidOperationTable(ConfigurationError):
    """The operation table or its path overrides are inconsistent: a deployment fault."""

    code = "invalid_kross_paths"
    hint = (
        "Keys of PMSGATE_KROSS_PATHS are operation names from "
        "pmsgate/integrations/kross/operations.yaml; values are paths under /v5/ such as "
        "'reservations/get-house-manual'."
    )


class OperationKind(StrEnum):
    """Whether an operation only reads or changes state upstream."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class Operation:
    """One booking-system operation: canonical name, current path, kind, and its wire data.

    ``alternate_paths`` are other places the same operation is seen in public
    integrations (tried, in order, when the current path answers "not found");
    ``request_fields`` maps our names for request fields to the names sent on the
    wire; ``response_fields`` maps names seen in answers to our models' names;
    ``page_size`` is the page length asked for on list reads.
    """

    name: str
    path: str
    kind: OperationKind
    replay_safe: bool
    purpose: str = ""
    alternate_paths: tuple[str, ...] = ()
    request_fields: Mapping[str, str] = field(default_factory=dict)
    response_fields: Mapping[str, str] = field(default_factory=dict)
    page_size: int | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """The current path first, then the alternates."""
        return (self.path, *(p for p in self.alternate_paths if p != self.path))

    def wire_name(self, field_name: str) -> str:
        """The name a request field is sent under (itself unless the table renames it)."""
        return self.request_fields.get(field_name, field_name)

    @property
    def is_write(self) -> bool:
        """True when the operation changes state upstream."""
        return self.kind is OperationKind.WRITE


@dataclass(frozen=True, slots=True)
class OutOfScopeRule:
    """A family of upstream operations this integration never calls."""

    pattern: str
    reason: str

    def matches(self, name: str) -> bool:
        """True when the operation name falls in this family."""
        return fnmatch.fnmatchcase(name, self.pattern)


class OperationTable:
    """The resolved operation table; :meth:`resolve` is the only way to an :class:`Operation`."""

    def __init__(
        self,
        operations: Mapping[str, Operation],
        *,
        nonexistent: frozenset[str],
        out_of_scope: tuple[OutOfScopeRule, ...],
    ) -> None:
        self._operations = dict(operations)
        self.nonexistent = nonexistent
        self.out_of_scope = out_of_scope

    def resolve(self, name: str) -> Operation:
        """The operation called ``name``; raises UnknownOperation or OutOfScopeOperation."""
        operation = self._operations.get(name)
        if operation is not None:
            return operation
        if _has_version_segment(name):
            raise UnknownOperation(
                "Operation names carry no /v5/ or /apiv5 prefix.",
                operation=name,
                hint="Use the operation name only, e.g. 'reservations/get-list'; "
                "/apiv5 is the human reference page and never returns data.",
            )
        if name in self.nonexistent:
            raise UnknownOperation(
                "This operation does not exist in the booking system.", operation=name
            )
        for rule in self.out_of_scope:
            if rule.matches(name):
                raise OutOfScopeOperation(
                    f"Out of scope for this integration: {rule.reason}.", operation=name
                )
        raise UnknownOperation("This operation is not in the operation table.", operation=name)

    def __contains__(self, name: object) -> bool:
        return name in self._operations

    def __iter__(self) -> Iterator[Operation]:
        return iter(self._operations.values())

    def __len__(self) -> int:
        return len(self._operations)

    @property
    def names(self) -> tuple[str, ...]:
        """Canonical names of every callable operation."""
        return tuple(self._operations)

    def __repr__(self) -> str:
        return f"OperationTable({len(self._operations)} operations)"


class _OperationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    kind: OperationKind
    replay_safe: bool | None = None
    purpose: str = ""
    alternate_paths: list[str] = Field(default_factory=list)
    request_fields: dict[str, str] = Field(default_factory=dict)
    response_fields: dict[str, str] = Field(default_factory=dict)
    page_size: int | None = Field(default=None, ge=1, le=1000)


class _OutOfScopeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class _TableSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    operations: dict[str, _OperationSpec]
    nonexistent: list[str] = Field(default_factory=list)
    out_of_scope: list[_OutOfScopeSpec] = Field(default_factory=list)


def _has_version_segment(path: str) -> bool:
    return any(segment in _VERSION_SEGMENTS for segment in path.strip("/").split("/"))


def _check_path(name: str, path: str, where: str) -> None:
    if _has_version_segment(path):
        raise InvalidOperationTable(
            f"{where}: the path of {name!r} must not contain a /v5 or /apiv5 segment."
        )
    if not _PATH_RE.match(path):
        raise InvalidOperationTable(
            f"{where}: the path of {name!r} is not of the form 'group/name' "
            "(lower case, no leading slash)."
        )


def _read_source(source: str | Path | None) -> Any:
    if source is None:
        text = (
            resources.files("pmsgate.integrations.kross")
            .joinpath(OPERATIONS_RESOURCE)
            .read_text("utf-8")
        )
    else:
        text = Path(source).read_text("utf-8")
    return yaml.safe_load(text)


def load_operations(
    overrides: Mapping[str, str] | None = None, *, source: str | Path | None = None
) -> OperationTable:
    """Load the operation table (packaged YAML unless ``source``) and apply path overrides."""
    where = str(source) if source is not None else OPERATIONS_RESOURCE
    try:
        spec = _TableSpec.model_validate(_read_source(source))
    except ValidationError as exc:
        raise InvalidOperationTable(f"{where} is malformed: {exc.error_count()} error(s).") from exc

    rules = tuple(OutOfScopeRule(r.pattern, r.reason) for r in spec.out_of_scope)
    nonexistent = frozenset(spec.nonexistent)
    overrides = dict(overrides or {})

    unknown = sorted(set(overrides) - set(spec.operations))
    if unknown:
        raise InvalidOperationTable(
            f"PMSGATE_KROSS_PATHS names operations that are not in the table: {unknown}; "
            f"known: {sorted(spec.operations)}."
        )

    operations: dict[str, Operation] = {}
    owner_of_path: dict[str, str] = {}
    for name, op in spec.operations.items():
        path = overrides.get(name, op.path)
        origin = "PMSGATE_KROSS_PATHS" if name in overrides else where
        _check_path(name, path, origin)
        for forbidden in (name, path):
            if forbidden in nonexistent:
                raise InvalidOperationTable(
                    f"{origin}: {name!r} maps to {forbidden!r}, which does not exist upstream."
                )
            if any(rule.matches(forbidden) for rule in rules):
                raise InvalidOperationTable(
                    f"{origin}: {name!r} maps to {forbidden!r}, which is out of scope."
                )
        if path in owner_of_path:
            raise InvalidOperationTable(
                f"{origin}: {name!r} and {owner_of_path[path]!r} both map to path {path!r}."
            )
        owner_of_path[path] = name
        for alternate in op.alternate_paths:
            _check_path(name, alternate, where)
        kind = op.kind
        replay_safe = op.replay_safe if op.replay_safe is not None else kind is OperationKind.READ
        operations[name] = Operation(
            name,
            path,
            kind,
            replay_safe,
            op.purpose,
            alternate_paths=tuple(a for a in op.alternate_paths if a != path),
            request_fields=dict(op.request_fields),
            response_fields=dict(op.response_fields),
            page_size=op.page_size,
        )

    return OperationTable(operations, nonexistent=nonexistent, out_of_scope=rules)
