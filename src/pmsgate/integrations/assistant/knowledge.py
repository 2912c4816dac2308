"""The knowledge base: directories and documents (``/v1/kb/nodes``), by listing and parent.

A node's ``entity_ids`` scope it to listings (empty: workspace-wide); a new body
is re-indexed by the platform.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from pmsgate.integrations.assistant.models import KbNode, KbNodeUpdate, NewKbNode, Page
from pmsgate.integrations.assistant.transport import OnObject, Transport, dump

NODES = "/v1/kb/nodes"


class NodeFilters(TypedDict, total=False):
    """Which knowledge nodes a list asks for; an option not given does not filter."""

    listing_id: str | None  # nodes scoped to this listing (``entity_ids``)
    parent_id: str | None  # children of this directory
    is_directory: bool | None  # directories only (True) or documents only (False)


class KnowledgeMixin(Transport):
    """Knowledge nodes: a page, every page, one; create, change, delete."""

    async def nodes_page(
        self,
        workspace_id: str,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        **filters: Unpack[NodeFilters],
    ) -> Page[KbNode]:
        """One page of knowledge nodes (of a listing, under a parent, when given)."""
        params = _node_filters(workspace_id, filters)
        return await self._page(
            NODES, KbNode, workspace_id=workspace_id, params=params, cursor=cursor, limit=limit
        )

    def iter_nodes(
        self, workspace_id: str, **filters: Unpack[NodeFilters]
    ) -> AsyncIterator[KbNode]:
        """Every matching knowledge node, page after page."""
        params = _node_filters(workspace_id, filters)
        return self._iterate(NODES, KbNode, workspace_id=workspace_id, params=params)

    async def list_nodes(self, workspace_id: str, **filters: Unpack[NodeFilters]) -> list[KbNode]:
        """Every matching knowledge node, collected."""
        params = _node_filters(workspace_id, filters)
        return await self._listed(KbNode, NODES, scope=workspace_id, params=params)

    async def get_node(self, node_id: str, *, workspace_id: str | None = None) -> KbNode:
        """One knowledge node."""
        return await self._get_object(KbNode, NODES, node_id, workspace_id)

    async def create_node(
        self, workspace_id: str, node: NewKbNode, *, idempotency_key: str | None = None
    ) -> KbNode:
        """Create a knowledge node (a document, or a directory with ``is_directory``)."""
        params, body = {"workspace_id": workspace_id}, dump(node)
        return await self._ask(
            KbNode,
            f"POST {NODES}",
            scope=workspace_id,
            params=params,
            body=body,
            key=idempotency_key,
        )

    async def create_directory(
        self,
        workspace_id: str,
        title: str,
        *,
        parent_id: str | None = None,
        entity_ids: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> KbNode:
        """Create a directory node (e.g. one per listing)."""
        node = NewKbNode(
            title=title,
            parent_id=parent_id,
            entity_ids=list(entity_ids),
            is_directory=True,
            metadata=dict(metadata or {}),
        )
        return await self.create_node(workspace_id, node, idempotency_key=idempotency_key)

    async def update_node(
        self, node_id: str, changes: KbNodeUpdate, **on: Unpack[OnObject]
    ) -> KbNode:
        """Change the fields set in ``changes`` (``PATCH /v1/kb/nodes/{id}``)."""
        return await self._update_object(KbNode, NODES, node_id, changes, **on)

    async def delete_node(self, node_id: str, **on: Unpack[OnObject]) -> None:
        """Delete a knowledge node (a directory must be empty)."""
        await self._delete_object(NODES, node_id, **on)


def _node_filters(workspace_id: str, filters: NodeFilters) -> dict[str, str]:
    params = {"workspace_id": workspace_id}
    for name in ("listing_id", "parent_id"):
        value = filters.get(name)
        if value:
            params[name] = str(value)
    is_directory = filters.get("is_directory")
    if is_directory is not None:
        params["is_directory"] = "true" if is_directory else "false"
    return params
