"""Catalogue sections written as mappings of named entries (``tools:``, ``skills:``).

In the YAML an entry's name is its key; the models want it as a field too.
"""

from __future__ import annotations

from typing import Any


def names_from_keys(raw: Any, section: str) -> Any:
    """``raw`` with each entry of its ``section`` mapping given its key as ``name``.

    Anything else (not a mapping, an entry that is not one) is left for validation to refuse.
    """
    if isinstance(raw, dict) and isinstance(raw.get(section), dict):
        return {
            **raw,
            section: {
                name: {"name": name, **body} if isinstance(body, dict) else body
                for name, body in raw[section].items()
            },
        }
    return raw
