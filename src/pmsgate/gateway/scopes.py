"""The scopes a gateway key may hold: the one vocabulary every route and command checks against.

Least privilege (docs/requirements.md R5.5): a key holds only the powers it was given.

- ``tools:read`` — the six tools (``/v1/tools/*`` and every MCP tool). The default, and
  the only scope of the key onboarding stores in a workspace.
- ``operations:read`` — the reads of ``/v1/operations`` (availability, reservations,
  check-in instructions, house manual, contract).
- ``operations:write:<operation>`` — one per write of the operations catalogue
  (``operations:write:reservations/add-payment``, ...): each write is granted separately.

The write scopes are derived from the catalogue (``integrations/kross/operations.yaml``),
never listed by hand, so a write added there gets its scope here. Unknown names are
refused (:func:`check_scopes`), never stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from pmsgate.errors import Forbidden, InvalidInput
from pmsgate.integrations.kross.client import TOKEN_OPERATION
from pmsgate.integrations.kross.operations import Operation, load_operations

TOOLS_READ = "tools:read"
OPERATIONS_READ = "operations:read"
WRITE_PREFIX = "operations:write:"
DEFAULT_SCOPES: tuple[str, ...] = (TOOLS_READ,)


def write_scope(operation: str) -> str:
    """The scope that allows one write operation."""
    return f"{WRITE_PREFIX}{operation}"


@cache
def all_scopes() -> tuple[str, ...]:
    """Every scope there is, in a stable order: tools, reads, then each write of the catalogue."""
    writes = tuple(
        write_scope(op.name)
        for op in load_operations()
        if op.is_write and op.name != TOKEN_OPERATION
    )
    return (TOOLS_READ, OPERATIONS_READ, *writes)


def operation_scope(operation: Operation) -> str:
    """The scope a call of this operation needs."""
    return write_scope(operation.name) if operation.is_write else OPERATIONS_READ


def check_scopes(scopes: Iterable[str]) -> list[str]:
    """Known scopes, deduplicated and in the vocabulary's order; an unknown name is a 422.

    An empty list is refused too: a key that can do nothing is a mistake, not a choice.
    """
    known = all_scopes()
    given = [scope.strip() for scope in scopes]
    unknown = sorted({scope for scope in given if scope not in known})
    if unknown:
        raise InvalidInput(
            f"Unknown scope {', '.join(repr(s) for s in unknown)}.",
            code="invalid_scope",
            hint=f"Known scopes: {', '.join(known)}.",
        )
    if not given:
        raise InvalidInput(
            "A gateway key needs at least one scope.",
            code="invalid_scope",
            hint=f"Give one or more of: {', '.join(known)} (the usual one is {TOOLS_READ}).",
        )
    return [scope for scope in known if scope in given]


def scope_missing(scope: str, key_prefix: str) -> Forbidden:
    """The 403 of a call outside the key's scopes (nothing was sent upstream)."""
    return Forbidden(
        f"The gateway key {key_prefix}… does not hold the scope {scope}; nothing was sent.",
        code="scope_missing",
        hint=f"Ask an admin for a key with {scope} "
        f"(`pmsgate facilities mint-key HOTEL_ID --scope {scope}`) or widen this one "
        f"(`pmsgate facilities grant-scopes HOTEL_ID KEY_ID --scope {scope}`).",
    )
