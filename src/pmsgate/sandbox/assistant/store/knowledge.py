"""The knowledge base: directories and documents, re-indexed when a document's body changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.errors import AssistantApiError
from pmsgate.sandbox.assistant.store.checks import (
    MAX_TITLE,
    check_body,
    check_entity_ids,
    required_text,
)
from pmsgate.sandbox.assistant.store.core import FieldCheck, StoreCore, as_given, found_on
from pmsgate.sandbox.assistant.store.records import KbNode, Tenant


def _nodes(tenant: Tenant) -> dict[str, KbNode]:
    return tenant.nodes


class KnowledgeMixin(StoreCore):
    """Knowledge nodes: create, list (by listing, parent, kind), read, change, delete."""

    def create_node(
        self,
        workspace_id: str,
        *,
        title: str,
        body: str = "",
        parent_id: str | None = None,
        entity_ids: Sequence[str] = (),
        is_directory: bool = False,
        metadata: Mapping[str, Any] | None = None,
        enabled: bool = True,
    ) -> KbNode:
        """A new node (a directory, or a document); its parent must be a directory here."""
        tenant = self._tenant(workspace_id)
        if parent_id is not None:
            _check_parent(tenant, parent_id)
        fresh = self._fresh(workspace_id, self.config.kb_node_id_format)
        node = KbNode(
            **fresh,
            title=required_text("title", title, MAX_TITLE),
            body=check_body(body),
            parent_id=parent_id,
            entity_ids=check_entity_ids(entity_ids),
            is_directory=is_directory,
            metadata=dict(metadata or {}),
            enabled=enabled,
            indexed_at=fresh["created_at"],
        )
        return self._keep(tenant.nodes, node)

    def nodes(
        self,
        workspace_id: str,
        *,
        listing_id: str | None = None,
        parent_id: str | None = None,
        is_directory: bool | None = None,
    ) -> list[KbNode]:
        """Nodes of a workspace, optionally of one listing (entity_ids) and under one parent."""
        return [
            n
            for n in self._tenant(workspace_id).nodes.values()
            if (listing_id is None or listing_id in n.entity_ids)
            and (parent_id is None or n.parent_id == parent_id)
            and (is_directory is None or n.is_directory == is_directory)
        ]

    node = found_on(_nodes, "node")

    def update_node(self, node_id: str, changes: Mapping[str, Any]) -> KbNode:
        """Change some fields of a node; a new body is re-indexed."""
        node = self.node(node_id)
        tenant = self._tenant(node.workspace_id)

        def parent(value: Any) -> Any:
            if value is not None:
                _check_parent(tenant, value, moving=node)
            return value

        checks: dict[str, FieldCheck] = {
            "title": lambda v: required_text("title", v, MAX_TITLE),
            "body": check_body,
            "parent_id": parent,
            "entity_ids": check_entity_ids,
            "metadata": lambda v: dict(v or {}),
            "enabled": as_given,
        }
        checked = self._checked(changes, checks)
        now = self.now()
        if "body" in checked and checked["body"] != node.body:
            node.index_version += 1
            node.indexed_at = now
        self._apply(node, checked, now)
        return node

    def delete_node(self, node_id: str) -> None:
        """Remove a node; a directory that still has children is refused (409)."""
        node = self.node(node_id)
        tenant = self._tenant(node.workspace_id)
        if any(n.parent_id == node_id for n in tenant.nodes.values()):
            raise AssistantApiError(
                errors.CONFLICT, "the directory is not empty; delete its children first"
            )
        self._forget(tenant.nodes, node_id)


def _check_parent(tenant: Tenant, parent_id: str, moving: KbNode | None = None) -> None:
    parent = tenant.nodes.get(parent_id)
    if parent is None:
        raise AssistantApiError(
            errors.VALIDATION, f"parent_id: no node {parent_id} in this workspace"
        )
    if not parent.is_directory:
        raise AssistantApiError(errors.VALIDATION, "parent_id must be a directory")
    if moving is not None:
        cursor: KbNode | None = parent
        while cursor is not None:
            if cursor.id == moving.id:
                raise AssistantApiError(
                    errors.VALIDATION, "parent_id would put the node inside itself"
                )
            cursor = tenant.nodes.get(cursor.parent_id) if cursor.parent_id else None
