"""Which pmsgate this is: one version and one source revision, read the same way everywhere.

- **version**: the installed distribution's (``pyproject.toml``'s ``version``, read with
  :func:`importlib.metadata.version`); ``0+unknown`` when pmsgate runs from a tree that was
  never installed.
- **revision**: the source commit it was built from. The image sets
  ``PMSGATE_BUILD_REVISION`` from its ``REVISION`` build argument (the same value as the
  ``org.opencontainers.image.revision`` label); a git checkout reads its ``HEAD`` (files only,
  no ``git`` process); otherwise ``unknown``.

``pmsgate --version``, the ``pmsgate_build_info`` metric, MCP's ``serverInfo.version``,
``/healthz`` and the console's footer all read :func:`build_info` (docs/operations.md,
"Which version runs").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "pmsgate"
UNKNOWN_VERSION = "0+unknown"
UNKNOWN_REVISION = "unknown"
REVISION_VARIABLE = "PMSGATE_BUILD_REVISION"
_SHA = re.compile(r"[0-9a-f]{7,64}")


@dataclass(frozen=True)
class BuildInfo:
    """The version and source revision of the running code."""

    version: str
    revision: str

    @property
    def short_revision(self) -> str:
        """The revision as people quote it (twelve hex digits), or ``unknown``."""
        return self.revision[:12] if _SHA.fullmatch(self.revision) else self.revision

    def __str__(self) -> str:
        return f"pmsgate {self.version} ({self.short_revision})"


def _installed_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN_VERSION


def _git_revision(start: Path) -> str | None:
    """The commit of ``HEAD`` in the checkout holding ``start``, read from .git's files."""
    for folder in (start, *start.parents):
        git = folder / ".git"
        if not git.is_dir():
            continue
        try:
            head = (git / "HEAD").read_text(encoding="utf-8").strip()
            if not head.startswith("ref: "):
                return head if _SHA.fullmatch(head) else None
            ref = head.removeprefix("ref: ")
            loose = git / ref
            if loose.is_file():
                found = loose.read_text(encoding="utf-8").strip()
                return found if _SHA.fullmatch(found) else None
            packed = git / "packed-refs"
            if packed.is_file():
                for line in packed.read_text(encoding="utf-8").splitlines():
                    sha, _, name = line.partition(" ")
                    if name == ref and _SHA.fullmatch(sha):
                        return sha
        except OSError:
            return None
        return None
    return None


def _revision() -> str:
    given = os.environ.get(REVISION_VARIABLE, "").strip().lower()
    if _SHA.fullmatch(given):
        return given
    return _git_revision(Path(__file__).resolve().parent) or UNKNOWN_REVISION


@cache
def build_info() -> BuildInfo:
    """This process's version and revision (read once)."""
    return BuildInfo(version=_installed_version(), revision=_revision())
