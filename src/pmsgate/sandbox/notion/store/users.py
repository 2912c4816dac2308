"""A workspace's users: the integration's bot and the people."""

from __future__ import annotations

from typing import Any

from pmsgate.sandbox.notion.errors import not_found
from pmsgate.sandbox.notion.store.core import StoreCore
from pmsgate.sandbox.notion.store.parsing import normalise_id, paginate
from pmsgate.sandbox.notion.store.records import User, Workspace


class UsersMixin(StoreCore):
    """GET /v1/users and /v1/users/{id} (the bot is ``users/me``)."""

    def bot(self, workspace: Workspace) -> User:
        """The integration's bot user (the token's own user)."""
        return workspace.users[0]

    def users(
        self, workspace: Workspace, start_cursor: Any, page_size: Any
    ) -> tuple[list[User], str | None]:
        """One page of the workspace's users (people and the bot), and the next cursor."""
        return paginate(workspace.users, start_cursor, page_size, "query")

    def user(self, workspace: Workspace, user_id: str) -> User:
        """One user of the workspace, or object_not_found."""
        key = normalise_id(user_id, "path.user_id")
        found = next((u for u in workspace.users if u.id == key), None)
        if found is None:
            raise not_found("user", user_id)
        return found
