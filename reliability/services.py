"""Use cases of the execution plane that people start: credentials, MCP servers, reconciliation.

Pipelines are submitted through `reliability.sagas.submit_pipeline`; reconciliation by the tool
through `reliability.reconcile`; jobs through `reliability.jobs`.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from lib.sealing import seal
from reliability.models import Credential, McpServer, ReconciliationItem
from reliability.reconcile import AlreadyResolved, resolve_reconciliation

__all__ = ["AlreadyResolved", "delete_credential", "register_mcp_server", "resolve_item", "save_credential"]


def save_credential(*, tenant, name: str, value: str, end_user: str = "", header: str = "Authorization",
                    scheme: str = "Bearer", user=None) -> Credential:
    """Create or rotate a tenant credential; the value is sealed before it reaches the database."""
    with transaction.atomic():
        credential, created = Credential.objects.get_or_create(
            tenant=tenant, name=name, end_user=end_user,
            defaults={"header": header, "scheme": scheme, "sealed_value": seal(value), "created_by": user})
        if not created:
            credential.header, credential.scheme, credential.sealed_value = header, scheme, seal(value)
            credential.rotated_at = timezone.now()
            credential.save(update_fields=["header", "scheme", "sealed_value", "rotated_at"])
    return credential


def delete_credential(*, credential: Credential) -> None:
    credential.delete()


def register_mcp_server(*, name: str, transport: str, url: str = "", command: str = "",
                        headers: dict[str, str] | None = None) -> McpServer:
    server, _ = McpServer.objects.get_or_create(name=name, defaults={"transport": transport})
    server.transport, server.url, server.command = transport, url, command
    server.set_headers(headers or {})
    server.save()
    return server


def resolve_item(*, item: ReconciliationItem, resolution: str, note: str, user) -> ReconciliationItem:
    """An owner's decision on an unknown outcome: the call, run and trace are updated."""
    return resolve_reconciliation(item=item, resolution=resolution, note=note, user=user, source="owner")
