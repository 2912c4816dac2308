"""Workspaces and what hangs on them: members, secrets, usage, the booking-system connection.

Listings are not stored: they are derived, on every read, from the booking-system
emulator (:class:`~pmsgate.sandbox.kross.store.KrossStore`) through the workspace's
PMS connection, so changing a facility's password there makes the workspace's
listings drop to none at once (docs/assistant-api.md "Listings").
"""

from __future__ import annotations

import hashlib
from decimal import Decimal

from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.errors import AssistantApiError
from pmsgate.sandbox.assistant.seed import ACCOUNT_OWNER_EMAIL, ACCOUNT_OWNER_NAME
from pmsgate.sandbox.assistant.store.checks import (
    EMAIL,
    MAX_SECRET_VALUE,
    ROLES,
    SECRET_NAME,
    check_name,
    check_role,
    required_text,
)
from pmsgate.sandbox.assistant.store.core import ID_LENGTH, StoreCore
from pmsgate.sandbox.assistant.store.records import (
    ApiToken,
    KrossConnection,
    Listing,
    Member,
    Secret,
    Tenant,
    Workspace,
    WorkspaceUsage,
)

# ASSUMED prices of the usage read (docs/assistant-api.md): the platform's are not public.
USD_PER_MESSAGE = Decimal("0.0200")
USD_PER_TOOL_RUN = Decimal("0.0050")


class WorkspacesMixin(StoreCore):
    """Workspaces, members and roles, secrets, usage, the PMS connection and listings."""

    def create_workspace(
        self,
        name: str,
        slug: str,
        *,
        owner_email: str = ACCOUNT_OWNER_EMAIL,
        owner_name: str = ACCOUNT_OWNER_NAME,
    ) -> Workspace:
        """A new workspace (unique slug) whose first member is the account owner."""
        name = required_text("name", name, 200)
        check_name("slug", slug)
        if any(t.workspace.slug == slug for t in self._tenants.values()):
            raise AssistantApiError(
                errors.CONFLICT, f"a workspace with slug '{slug}' already exists"
            )
        now = self.now()
        workspace = Workspace(self._next_seq(), self._new_id(), name, slug, now)
        self._tenants[workspace.id] = Tenant(workspace)
        self.add_member(workspace.id, owner_email, "Owner", owner_name)
        return workspace

    def workspaces(self, token: ApiToken | None = None) -> list[Workspace]:
        """Workspaces the token can see (all of them without a token)."""
        return [
            t.workspace
            for t in self._tenants.values()
            if token is None or token.workspace_ids is None or t.workspace.id in token.workspace_ids
        ]

    def workspace(self, workspace_id: str) -> Workspace:
        """One workspace, or 404."""
        return self._tenant(workspace_id).workspace

    # --- members and roles -----------------------------------------------------------------

    def roles(self) -> list[tuple[str, str]]:
        """Every role and what it allows."""
        return list(ROLES.items())

    def members(self, workspace_id: str) -> list[Member]:
        """A workspace's members."""
        return list(self._tenant(workspace_id).members.values())

    def add_member(self, workspace_id: str, email: str, role: str, name: str = "") -> Member:
        """Add a person with a role; an e-mail already in the workspace is a conflict."""
        tenant = self._tenant(workspace_id)
        if not EMAIL.match(email or ""):
            raise AssistantApiError(errors.VALIDATION, "email must be an e-mail address")
        check_role(role)
        if any(m.email.lower() == email.lower() for m in tenant.members.values()):
            raise AssistantApiError(
                errors.CONFLICT, f"{email} is already a member of this workspace"
            )
        member = Member(
            self._next_seq(), self._new_id(), workspace_id, email, name, role, self.now()
        )
        tenant.members[member.id] = member
        return member

    def set_member_role(self, workspace_id: str, member_id: str, role: str) -> Member:
        """Change a member's role."""
        member = self._tenant(workspace_id).members.get(member_id)
        if member is None:
            raise AssistantApiError(errors.NOT_FOUND, f"no member {member_id} in this workspace")
        check_role(role)
        member.role = role
        return member

    # --- secrets ---------------------------------------------------------------------------

    def secrets(self, workspace_id: str) -> list[Secret]:
        """A workspace's secrets (callers show names only)."""
        return list(self._tenant(workspace_id).secrets.values())

    def set_secret(self, workspace_id: str, name: str, value: str) -> tuple[Secret, bool]:
        """Create or replace a secret; True when it is new."""
        tenant = self._tenant(workspace_id)
        if not SECRET_NAME.match(name):
            raise AssistantApiError(
                errors.VALIDATION,
                "secret names are letters, digits and underscores, not starting with a digit "
                "(at most 128)",
            )
        if not isinstance(value, str) or not value or len(value) > MAX_SECRET_VALUE:
            raise AssistantApiError(
                errors.VALIDATION, f"value must be 1 to {MAX_SECRET_VALUE} characters"
            )
        now = self.now()
        existing = tenant.secrets.get(name)
        if existing is not None:
            existing.value, existing.updated_at = value, now
            return existing, False
        secret = Secret(self._next_seq(), name, value, now, now)
        tenant.secrets[name] = secret
        return secret, True

    def delete_secret(self, workspace_id: str, name: str) -> None:
        """Remove a secret, or 404."""
        if self._tenant(workspace_id).secrets.pop(name, None) is None:
            raise AssistantApiError(errors.NOT_FOUND, f"no secret {name}")

    # --- usage (assumed API, docs/assistant-api.md) -----------------------------------------

    def usage(self, workspace_id: str) -> WorkspaceUsage:
        """Cumulative usage: one message per test conversation, tool runs, added traffic."""
        tenant = self._tenant(workspace_id)
        messages = len(tenant.conversations) + tenant.traffic_messages
        tool_calls = len(tenant.runs) + tenant.traffic_tool_calls
        return WorkspaceUsage(
            workspace_id=workspace_id,
            usd_spent=messages * USD_PER_MESSAGE + tool_calls * USD_PER_TOOL_RUN,
            messages=messages,
            tool_calls=tool_calls,
            as_of=self.now(),
        )

    def add_traffic(self, workspace_id: str, messages: int = 0, tool_calls: int = 0) -> None:
        """Count guest messages and tool calls the workspace handled (a sandbox control)."""
        if messages < 0 or tool_calls < 0:
            raise AssistantApiError(errors.VALIDATION, "traffic counts cannot be negative")
        tenant = self._tenant(workspace_id)
        tenant.traffic_messages += messages
        tenant.traffic_tool_calls += tool_calls

    # --- booking-system connection and listings --------------------------------------------

    def set_kross_connection(
        self, workspace_id: str, hotel_id: str, username: str, password: str
    ) -> KrossConnection:
        """Store the workspace's booking-system credentials (a sandbox control)."""
        connection = KrossConnection(hotel_id, username, password)
        self._tenant(workspace_id).connection = connection
        return connection

    def clear_kross_connection(self, workspace_id: str) -> None:
        """Forget the workspace's booking-system credentials."""
        self._tenant(workspace_id).connection = None

    def pms_connection(self, workspace_id: str) -> tuple[KrossConnection | None, bool]:
        """The stored credentials and whether they work against the booking-system emulator now."""
        connection = self._tenant(workspace_id).connection
        return connection, self._healthy(connection)

    def listings(self, workspace_id: str) -> list[Listing]:
        """One listing per apartment of the connected facility; none while the connection fails."""
        connection = self._tenant(workspace_id).connection
        if connection is None or self.kross is None or not self._healthy(connection):
            return []
        facility = self.kross.facility(connection.hotel_id)
        apartments = sorted(facility.apartments.values(), key=lambda a: a.id_room_type)
        return [
            Listing(
                seq=index,
                # Stable across connection failures, so registry rows stay valid.
                id=hashlib.sha256(
                    f"{workspace_id}:{facility.hotel_id}:{a.id_room_type}".encode()
                ).hexdigest()[:ID_LENGTH],
                workspace_id=workspace_id,
                name=a.name,
                external_id=str(a.id_room_type),
                hotel_id=facility.hotel_id,
                id_room_type=a.id_room_type,
            )
            for index, a in enumerate(apartments)
        ]

    def _healthy(self, connection: KrossConnection | None) -> bool:
        if connection is None or self.kross is None:
            return False
        if not self.kross.has_facility(connection.hotel_id):
            return False
        facility = self.kross.facility(connection.hotel_id)
        return (facility.username, facility.password) == (
            connection.username,
            connection.password,
        )
