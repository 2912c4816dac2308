"""Listings and the booking-system (PMS) connection the platform derives them from.

Both are this project's assumptions (docs/assistant-api.md "Listings"): the
platform's listings sync reads the booking system with the workspace's
credentials; while they fail, the workspace has no listings.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import SecretStr

from pmsgate.integrations.assistant.errors import AssistantNotFound
from pmsgate.integrations.assistant.models import KrossConnection, Listing
from pmsgate.integrations.assistant.transport import Transport

CONNECTION = "/v1/workspaces/{id}/pms-connection"


class ListingsMixin(Transport):
    """A workspace's listings and its booking-system connection."""

    async def list_listings(self, workspace_id: str) -> list[Listing]:
        """Every listing of a workspace (all pages); none while its PMS connection fails."""
        return await self._in_workspace(Listing, "/v1/listings", workspace_id, assumed=True)

    async def get_kross_connection(self, workspace_id: str) -> KrossConnection | None:
        """The workspace's booking-system connection; None when it has none (assumed endpoint)."""
        try:
            route = f"GET {CONNECTION}"
            return await self._ask(KrossConnection, route, workspace_id, scope=workspace_id)
        except AssistantNotFound:
            # 404 = this workspace has no connection (the assumed shape), or no such endpoint.
            return None

    async def set_kross_connection(
        self,
        workspace_id: str,
        *,
        hotel_id: str,
        username: str,
        password: SecretStr,
        api_key: SecretStr | None = None,
        idempotency_key: str | None = None,
    ) -> KrossConnection:
        """Give the platform's listings sync new booking-system credentials (assumed endpoint)."""
        plain = password.get_secret_value()
        body: dict[str, Any] = {
            "provider": "kross",
            "hotel_id": hotel_id,
            "username": username,
            "password": plain,
        }
        secrets: tuple[str, ...] = (plain,)
        if api_key is not None:
            body["api_key"] = api_key.get_secret_value()
            secrets = (plain, body["api_key"])
        # A fresh key per call: this call's retries are safe, a later call is a new write.
        key = idempotency_key or f"pms-connection:{uuid.uuid4().hex}"
        return await self._ask_workspace(
            KrossConnection, f"PUT {CONNECTION}", workspace_id, body=body, key=key, secrets=secrets
        )
