"""What every part of the emulator's store stands on: its state, ids, and the request accounting.

:class:`StoreCore` holds the tenants (one per workspace), the id generator seeded with
the seed number, the tokens, the 120/min sliding windows, the stored answers of
idempotent writes, the switches, the faults and the stats. The resource parts
(workspaces, tools, agents, knowledge) are mixins on it, composed into
:class:`~pmsgate.sandbox.assistant.store.AssistantStore`.
"""

from __future__ import annotations

import copy
import random
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pmsgate.clock import Clock, ManualClock
from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.errors import AssistantApiError
from pmsgate.sandbox.assistant.store.checks import choice
from pmsgate.sandbox.assistant.store.records import (
    Agent,
    ApiToken,
    CustomTool,
    Faults,
    KbNode,
    SandboxConfig,
    Skill,
    SlidingWindow,
    Stats,
    StoredAnswer,
    Tenant,
)
from pmsgate.sandbox.core import set_given
from pmsgate.sandbox.kross.store import KrossStore

ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
ID_LENGTH = 32
ID_FORMATS = ("convex32", "hex24")
UNDOCUMENTED_MODES = ("present", "absent")


# What a workspace owns and the store finds by id alone.
_O = TypeVar("_O", CustomTool, Skill, Agent, KbNode)

# A field's check: the value as stored, or a AssistantApiError.
FieldCheck = Callable[[Any], Any]


def as_given(value: Any) -> Any:
    """The check of a field any value may take."""
    return value


class StoreCore:
    """The state of the emulator and the steps every request goes through."""

    seed: int
    clock: Clock
    kross: KrossStore | None
    _defaults: SandboxConfig
    config: SandboxConfig
    faults: Faults
    stats: Stats

    def _clear(self) -> None:
        """Forget everything: tokens, tenants, windows, answers, faults and stats."""
        self._rng = random.Random(self.seed)
        self._seq = 0
        self._tokens: dict[str, ApiToken] = {}
        self._tenants: dict[str, Tenant] = {}
        self._owners: dict[str, str] = {}  # resource id -> workspace id
        self._windows: dict[str, SlidingWindow] = {}
        self._answers: dict[tuple[str, str], StoredAnswer] = {}
        self.config = copy.copy(self._defaults)
        self.faults = Faults()
        self.stats = Stats()

    def now(self) -> datetime:
        """The emulator's current time."""
        return self.clock.now()

    # --- tokens and accounting -------------------------------------------------------------

    def add_token(self, value: str, *, name: str, workspace_ids: Sequence[str] | None) -> ApiToken:
        """Register a bearer token (the seed's account token, or one made by a control)."""
        if workspace_ids is not None:
            for workspace_id in workspace_ids:
                self._tenant(workspace_id)
        token = ApiToken(
            value, name, frozenset(workspace_ids) if workspace_ids is not None else None
        )
        self._tokens[value] = token
        return token

    def issue_token(self, name: str, workspace_ids: Sequence[str] | None) -> ApiToken:
        """A new random token, account-wide or scoped to the given workspaces."""
        return self.add_token(
            "sbx-" + secrets.token_hex(16), name=name, workspace_ids=workspace_ids
        )

    def authenticate(self, value: str | None) -> ApiToken:
        """The token a bearer value names, or 401."""
        token = self._tokens.get(value or "")
        if token is None:
            self.stats.unauthorized += 1
            raise AssistantApiError(errors.UNAUTHORIZED)
        return token

    def authorize(self, token: ApiToken, workspace_id: str) -> None:
        """Refuse (403) a scoped token outside its workspaces."""
        if token.workspace_ids is not None and workspace_id not in token.workspace_ids:
            raise AssistantApiError(errors.FORBIDDEN)

    def admit(self, scope: str, route: str) -> None:
        """Count one request against ``scope`` (a workspace id or a token key), or refuse 429."""
        window = self._windows.setdefault(scope, SlidingWindow())
        now = self.now().timestamp()
        wait = window.wait_seconds(now, self.config.requests_per_minute)
        if wait is not None:
            # Refused requests are not counted: otherwise Retry-After would never come true.
            self.stats.rate_limited[scope] += 1
            raise AssistantApiError(
                errors.RATE_LIMITED,
                f"rate limit exceeded: {self.config.requests_per_minute} requests per minute "
                "per workspace",
                headers={"Retry-After": str(wait)},
            )
        window.record(now)
        self.stats.requests_by_scope[scope] += 1
        self.stats.requests_by_route[route] += 1

    def draw_fault(self) -> None:
        """Answer the injected failure if one is armed."""
        if self.faults.fail_next > 0:
            self.faults.fail_next -= 1
            self.stats.injected_errors += 1
            spec = errors.ErrorSpec(
                errors.UNAVAILABLE.code, self.faults.fail_status, errors.UNAVAILABLE.message
            )
            raise AssistantApiError(spec)

    def replay(self, scope: str, key: str, fingerprint: str) -> StoredAnswer | None:
        """The stored answer of an earlier write with this Idempotency-Key, if any."""
        stored = self._answers.get((scope, key))
        if stored is None:
            return None
        if stored.fingerprint != fingerprint:
            raise AssistantApiError(
                errors.VALIDATION, "Idempotency-Key was already used with a different request"
            )
        self.stats.idempotent_replays += 1
        return stored

    def remember(self, scope: str, key: str, fingerprint: str, status: int, body: Any) -> None:
        """Keep a successful write's answer for replays of the same Idempotency-Key."""
        self._answers[(scope, key)] = StoredAnswer(fingerprint, status, copy.deepcopy(body))

    def owner_of(self, resource_id: str) -> str:
        """The workspace a tool, skill, agent or node belongs to, or 404."""
        workspace_id = self._owners.get(resource_id)
        if workspace_id is None:
            raise AssistantApiError(errors.NOT_FOUND, f"no object with id {resource_id}")
        return workspace_id

    # --- test controls ---------------------------------------------------------------------

    def configure(
        self,
        requests_per_minute: int | None = None,
        tool_timeout_s: float | None = None,
        *,
        undocumented_endpoints: str | None = None,
        kb_node_id_format: str | None = None,
    ) -> SandboxConfig:
        """Change the switches given (the others stay as they are)."""
        if undocumented_endpoints is not None:
            choice("undocumented_endpoints", undocumented_endpoints, UNDOCUMENTED_MODES)
        if kb_node_id_format is not None:
            choice("kb_node_id_format", kb_node_id_format, ID_FORMATS)
        return set_given(
            self.config,
            requests_per_minute=requests_per_minute,
            tool_timeout_s=tool_timeout_s,
            undocumented_endpoints=undocumented_endpoints,
            kb_node_id_format=kb_node_id_format,
        )

    def set_faults(self, fail_next: int | None = None, fail_status: int | None = None) -> Faults:
        """Arm faults (the ones not given stay as they are)."""
        return set_given(self.faults, fail_next=fail_next, fail_status=fail_status)

    def clear_faults(self) -> None:
        """Disarm every fault."""
        self.faults = Faults()

    def advance_clock(self, seconds: float) -> datetime:
        """Move a ManualClock forward; any other clock refuses."""
        if not isinstance(self.clock, ManualClock):
            raise AssistantApiError(errors.BAD_REQUEST, "the emulator's clock is not a ManualClock")
        return self.clock.advance(seconds)

    # --- what the resource parts share -----------------------------------------------------

    def _tenant(self, workspace_id: str) -> Tenant:
        tenant = self._tenants.get(workspace_id)
        if tenant is None:
            raise AssistantApiError(errors.NOT_FOUND, f"no workspace {workspace_id}")
        return tenant

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _new_id(self, id_format: str = "convex32") -> str:
        if id_format == "hex24":
            return f"{self._rng.getrandbits(96):024x}"
        return "".join(self._rng.choice(ID_ALPHABET) for _ in range(ID_LENGTH))

    def _fresh(self, workspace_id: str, id_format: str = "convex32") -> dict[str, Any]:
        """The fields every new resource starts with: seq, id, workspace, both timestamps."""
        now = self.now()
        return {
            "seq": self._next_seq(),
            "id": self._new_id(id_format),
            "workspace_id": workspace_id,
            "created_at": now,
            "updated_at": now,
        }

    def _keep(self, shelf: dict[str, _O], item: _O) -> _O:
        """File a new resource on its tenant's shelf and remember its workspace."""
        shelf[item.id] = item
        self._owners[item.id] = item.workspace_id
        return item

    def _owned(self, shelf_of: Callable[[Tenant], dict[str, _O]], object_id: str, kind: str) -> _O:
        """One resource of the workspace that owns ``object_id``, or 404."""
        item = shelf_of(self._tenant(self.owner_of(object_id))).get(object_id)
        if item is None:
            raise AssistantApiError(errors.NOT_FOUND, f"no {kind} {object_id}")
        return item

    def _forget(self, shelf: dict[str, Any], object_id: str) -> None:
        del shelf[object_id]
        del self._owners[object_id]

    @staticmethod
    def _checked(changes: Mapping[str, Any], checks: Mapping[str, FieldCheck]) -> dict[str, Any]:
        """Each change through its field's check; a field without one cannot be changed."""
        checked: dict[str, Any] = {}
        for key, value in changes.items():
            check = checks.get(key)
            if check is None:
                raise AssistantApiError(errors.VALIDATION, f"{key} cannot be changed")
            checked[key] = check(value)
        return checked

    def _apply(self, item: Any, checked: Mapping[str, Any], now: datetime | None = None) -> None:
        for key, value in checked.items():
            setattr(item, key, value)
        item.updated_at = now or self.now()

    @staticmethod
    def _unique_name(
        shelf: dict[str, Any], kind: str, check: FieldCheck, renamed: str | None = None
    ) -> FieldCheck:
        """The check of a name: ``check``, then no other ``kind`` (e.g. "a skill") of the shelf
        has it (``renamed``: the id of the object whose name changes, not counted)."""

        def unique(value: Any) -> Any:
            value = check(value)
            if any(item.name == value and item.id != renamed for item in shelf.values()):
                raise AssistantApiError(
                    errors.CONFLICT, f"{kind} named '{value}' already exists in this workspace"
                )
            return value

        return unique


_T = TypeVar("_T")


def listed_on(shelf: Callable[[Tenant], dict[str, _O]]) -> Callable[[StoreCore, str], list[_O]]:
    """The store method listing a workspace's objects of one kind (on ``shelf``)."""

    def listed(self: StoreCore, workspace_id: str) -> list[_O]:
        """The workspace's objects of this kind, oldest first."""
        return list(shelf(self._tenant(workspace_id)).values())

    return listed


def found_on(shelf: Callable[[Tenant], dict[str, _O]], kind: str) -> Callable[[StoreCore, str], _O]:
    """The store method reading one object of a kind by id alone (``kind`` names it in a 404)."""

    def found(self: StoreCore, object_id: str) -> _O:
        """One object, in whichever workspace owns it, or 404."""
        return self._owned(shelf, object_id, kind)

    return found
