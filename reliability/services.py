"""Use cases of the execution plane that people start: credentials and their bindings, MCP servers,
reconciliation.

Pipelines are submitted through `reliability.sagas.submit_pipeline`; reconciliation by the tool
through `reliability.reconcile`; jobs through `reliability.jobs`.
"""

from __future__ import annotations

import re

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from console.models import Role
from console.tenancy import has_role
from lib.endpoints import endpoint_of
from lib.sealing import seal
from reliability.models import (
    Credential,
    CredentialAction,
    CredentialAudit,
    CredentialBinding,
    McpServer,
    ReconciliationItem,
)
from reliability.reconcile import AlreadyResolved, resolve_reconciliation

__all__ = [
    "AlreadyResolved",
    "bind_credential",
    "delete_credential",
    "register_mcp_server",
    "resolve_item",
    "save_credential",
    "unbind_credential",
]

# A skill name (`customer.read_profile`) or a namespace (`customer.*`, `mcp.ticket_desk.*`); never a bare `*`.
SKILL_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.\*)?$")
ENDPOINT = re.compile(r"^(https?://[^/?#@\s]+|mcp://[a-z0-9][a-z0-9_.-]*|python:[A-Za-z_][\w.]*)$")


def _require_admin(tenant, user) -> None:
    """Tenant admins (platform admins hold every role); `user=None` is an operator's command or a seeder."""
    if user is not None and not has_role(user, tenant, Role.ADMIN):
        raise PermissionDenied(f"Only admins of {tenant.slug} change its credentials and their bindings.")


def _audit(*, tenant, name: str, action: str, user, **detail) -> CredentialAudit:
    label = user.get_username() if user is not None else "operator"
    return CredentialAudit.objects.create(
        tenant=tenant,
        credential_name=name,
        action=action,
        actor=user,
        actor_label=label,
        detail={k: v for k, v in detail.items() if v},
    )


def save_credential(
    *,
    tenant,
    name: str,
    value: str,
    end_user: str = "",
    header: str = "Authorization",
    scheme: str = "Bearer",
    user=None,
) -> Credential:
    """Create or rotate a tenant credential; the value is sealed before it reaches the database."""
    _require_admin(tenant, user)
    with transaction.atomic():
        credential, created = Credential.objects.get_or_create(
            tenant=tenant,
            name=name,
            end_user=end_user,
            defaults={"header": header, "scheme": scheme, "sealed_value": seal(value), "created_by": user},
        )
        if not created:
            credential.header, credential.scheme, credential.sealed_value = header, scheme, seal(value)
            credential.rotated_at = timezone.now()
            credential.save(update_fields=["header", "scheme", "sealed_value", "rotated_at"])
        _audit(
            tenant=tenant,
            name=name,
            user=user,
            end_user=end_user,
            header=header,
            action=CredentialAction.SAVED if created else CredentialAction.ROTATED,
        )
    return credential


def delete_credential(*, credential: Credential, user=None) -> None:
    """Delete one credential row; when it was the last of its name, its bindings go with it (audited)."""
    _require_admin(credential.tenant, user)
    with transaction.atomic():
        tenant, name = credential.tenant, credential.name
        _audit(tenant=tenant, name=name, action=CredentialAction.DELETED, user=user, end_user=credential.end_user)
        credential.delete()
        if not Credential.objects.filter(tenant=tenant, name=name).exists():
            for binding in CredentialBinding.objects.filter(tenant=tenant, credential_name=name):
                _unbind(binding, user=user, note="the credential was deleted")


def normal_endpoint(endpoint: str) -> str:
    """The endpoint a binding names, in the form execution compares (`lib.endpoints`); refuses anything else."""
    normal = endpoint_of(endpoint)
    if not ENDPOINT.match(normal) or normal.endswith("://"):
        raise ValidationError(
            "Give the service's address: https://host[:port] (a full URL is cut to its "
            "scheme, host and port), mcp://<server>, or python:<module.function>."
        )
    return normal


def bind_credential(*, tenant, credential_name: str, skill_pattern: str, endpoint: str, user) -> CredentialBinding:
    """Let the tenant's credential go with skills matching `skill_pattern` to `endpoint` (and nowhere else)."""
    _require_admin(tenant, user)
    skill_pattern = skill_pattern.strip()
    if not SKILL_PATTERN.match(skill_pattern):
        raise ValidationError("Name one skill (customer.read_profile) or a namespace (customer.*).")
    endpoint = normal_endpoint(endpoint)
    if not Credential.objects.filter(tenant=tenant, name=credential_name).exists():
        raise ValidationError(f"{tenant.slug} has no credential named {credential_name}.")
    with transaction.atomic():
        binding, created = CredentialBinding.objects.get_or_create(
            tenant=tenant,
            credential_name=credential_name,
            skill_pattern=skill_pattern,
            endpoint=endpoint,
            defaults={"created_by": user},
        )
        if created:
            _audit(
                tenant=tenant,
                name=credential_name,
                action=CredentialAction.BOUND,
                user=user,
                skill_pattern=skill_pattern,
                endpoint=endpoint,
            )
    return binding


def unbind_credential(*, binding: CredentialBinding, user) -> None:
    """Remove a binding: from the next call, the credential no longer goes there."""
    _require_admin(binding.tenant, user)
    with transaction.atomic():
        _unbind(binding, user=user)


def _unbind(binding: CredentialBinding, *, user, note: str = "") -> None:
    _audit(
        tenant=binding.tenant,
        name=binding.credential_name,
        action=CredentialAction.UNBOUND,
        user=user,
        skill_pattern=binding.skill_pattern,
        endpoint=binding.endpoint,
        note=note,
    )
    binding.delete()


def register_mcp_server(
    *, name: str, transport: str, url: str = "", command: str = "", headers: dict[str, str] | None = None
) -> McpServer:
    server, _ = McpServer.objects.get_or_create(name=name, defaults={"transport": transport})
    server.transport, server.url, server.command = transport, url, command
    server.set_headers(headers or {})
    server.save()
    return server


def resolve_item(*, item: ReconciliationItem, resolution: str, note: str, user) -> ReconciliationItem:
    """An owner's decision on an unknown outcome: the call, run and trace are updated."""
    return resolve_reconciliation(item=item, resolution=resolution, note=note, user=user, source="owner")
