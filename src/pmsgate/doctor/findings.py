"""What the doctor found: one :class:`Finding` per check, gathered in a :class:`Report`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """How a check came out; only ``fail`` makes the command exit non-zero."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Finding:
    """One check: where (``area``), what, how it came out, what was seen, what to do."""

    area: str
    check: str
    status: Status
    found: str
    advice: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        data = asdict(self)
        data["status"] = self.status.value
        return data


@dataclass
class Report:
    """Every finding, in the order the checks ran."""

    findings: list[Finding] = field(default_factory=list)

    def add(
        self,
        area: str,
        check: str,
        status: Status,
        found: str,
        advice: str | None = None,
        **details: Any,
    ) -> Finding:
        """Record one finding and return it."""
        finding = Finding(area, check, status, found, advice, details)
        self.findings.append(finding)
        return finding

    @property
    def failed(self) -> bool:
        """True when any check failed."""
        return any(f.status is Status.FAIL for f in self.findings)

    def counts(self) -> dict[str, int]:
        """How many findings of each status."""
        return {s.value: sum(1 for f in self.findings if f.status is s) for s in Status}

    def of(self, area: str, check: str) -> Finding | None:
        """The finding of one check, if it ran."""
        return next((f for f in self.findings if f.area == area and f.check == check), None)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view: the findings and a summary."""
        return {
            "ok": not self.failed,
            "counts": self.counts(),
            "findings": [f.as_dict() for f in self.findings],
        }
