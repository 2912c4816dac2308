"""Workspaces and what hangs on one: usage, members and roles, secrets.

Listing workspaces is documented; creating one, its usage, members, roles and
secrets are this project's assumptions (docs/assistant-api.md "Assumed endpoints"):
their refusal raises :class:`~pmsgate.integrations.assistant.errors.AssistantEndpointUnavailable`.
"""

from __future__ import annotations

import uuid

from pydantic import SecretStr

from pmsgate.integrations.assistant.errors import AssistantConflict
from pmsgate.integrations.assistant.models import (
    Member,
    Role,
    SecretInfo,
    Workspace,
    WorkspaceUsage,
)
from pmsgate.integrations.assistant.transport import Transport

WORKSPACE = "/v1/workspaces/{id}"


class WorkspacesMixin(Transport):
    """Workspaces, their usage, members, roles and secrets."""

    async def list_workspaces(self) -> list[Workspace]:
        """Every workspace the token can see (all pages)."""
        return await self._listed(Workspace, "/v1/workspaces", scope=None)

    async def get_workspace(self, workspace_id: str) -> Workspace:
        """One workspace."""
        return await self._ask_workspace(Workspace, f"GET {WORKSPACE}", workspace_id)

    async def workspace_usage(self, workspace_id: str) -> WorkspaceUsage:
        """The workspace's cumulative usage (``GET /v1/workspaces/{id}/usage``; assumed shape)."""
        return await self._ask_workspace(WorkspaceUsage, f"GET {WORKSPACE}/usage", workspace_id)

    async def create_workspace(
        self, name: str, slug: str, *, idempotency_key: str | None = None
    ) -> Workspace:
        """Create a workspace (``POST /v1/workspaces``; this project's assumed shape)."""
        body, route = {"name": name, "slug": slug}, "POST /v1/workspaces"
        return await self._ask(
            Workspace, route, scope=None, assumed=True, body=body, key=idempotency_key
        )

    async def ensure_workspace(self, name: str, slug: str) -> Workspace:
        """The workspace with this slug, created if absent (onboarding, docs/onboarding.md)."""
        found = await self._workspace_by_slug(slug)
        if found is not None:
            return found
        try:
            # A fresh key per call: retries of this one creation are safe, a later call is new.
            return await self.create_workspace(
                name, slug, idempotency_key=f"ensure-workspace:{slug}:{uuid.uuid4().hex}"
            )
        except AssistantConflict:
            # Someone else created it between our list and our create: theirs is ours.
            found = await self._workspace_by_slug(slug)
            if found is None:
                raise
            return found

    async def _workspace_by_slug(self, slug: str) -> Workspace | None:
        return next((w for w in await self.list_workspaces() if w.slug == slug), None)

    # --- members and roles ---------------------------------------------------------------------

    async def list_members(self, workspace_id: str) -> list[Member]:
        """Every member of a workspace with their role (all pages)."""
        members = f"{WORKSPACE}/members"
        return await self._listed(Member, members, workspace_id, scope=workspace_id, assumed=True)

    async def add_member(
        self,
        workspace_id: str,
        email: str,
        role: str,
        *,
        name: str = "",
        idempotency_key: str | None = None,
    ) -> Member:
        """Add a person to a workspace with a role (e.g. ``Admin``)."""
        body = {"email": email, "role": role, "name": name}
        route = f"POST {WORKSPACE}/members"
        return await self._ask_workspace(
            Member, route, workspace_id, body=body, key=idempotency_key
        )

    async def set_member_role(
        self, workspace_id: str, member_id: str, role: str, *, idempotency_key: str | None = None
    ) -> Member:
        """Change a member's role."""
        route, body = f"PATCH {WORKSPACE}/members/{{member_id}}", {"role": role}
        return await self._ask_workspace(
            Member, route, workspace_id, member_id, body=body, key=idempotency_key
        )

    async def list_roles(self, workspace_id: str) -> list[Role]:
        """The roles a workspace member can have."""
        roles = f"{WORKSPACE}/roles"
        return await self._listed(Role, roles, workspace_id, scope=workspace_id, assumed=True)

    # --- secrets -------------------------------------------------------------------------------

    async def set_secret(
        self, workspace_id: str, name: str, value: SecretStr, *, idempotency_key: str | None = None
    ) -> SecretInfo:
        """Create or replace a workspace secret (tool code reads it as an environment variable)."""
        plain, route = value.get_secret_value(), f"PUT {WORKSPACE}/secrets/{{name}}"
        return await self._ask_workspace(
            SecretInfo,
            route,
            workspace_id,
            name,
            body={"value": plain},
            key=idempotency_key,
            secrets=(plain,),
        )

    async def list_secrets(self, workspace_id: str) -> list[SecretInfo]:
        """The names of a workspace's secrets (values are never readable)."""
        secrets = f"{WORKSPACE}/secrets"
        return await self._listed(
            SecretInfo, secrets, workspace_id, scope=workspace_id, assumed=True
        )
