"""A page's query parameters as it reads them: one of the allowed values, or a 422 saying which.

The console's lists (the admin overview, the incidents) take their filters and sort from
the query string, so a selection is bookmarkable; a value they do not know is refused with
the allowed ones named, never a 500.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pmsgate.errors import InvalidInput


@dataclass(frozen=True)
class ParameterRules:
    """How one page refuses a bad parameter: its error code, and where else to go."""

    code: str
    elsewhere: str  # the hint's last sentence, e.g. "Or open /console for the whole list."

    def bad(self, name: str, value: str, allowed: Sequence[str]) -> InvalidInput:
        """422: ``value`` is not one of ``allowed`` for ``name``."""
        shown = value if len(value) <= 40 else value[:40] + "…"
        return InvalidInput(
            f"{shown!r} is not a valid value for {name!r}.",
            code=self.code,
            hint=f"{name} is one of: {', '.join(allowed)}. {self.elsewhere}",
        )

    def choice(
        self, params: Mapping[str, str], name: str, allowed: Sequence[str], default: str
    ) -> str:
        """The allowed value ``name`` names (any case), ``default`` when empty; else 422."""
        value = params.get(name, "").strip()
        if not value:
            return default
        for choice in allowed:
            if value.casefold() == choice.casefold():
                return choice
        raise self.bad(name, value, allowed)
