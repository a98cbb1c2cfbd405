"""Use cases of the execution plane that people start: credentials and their bindings, MCP servers,
reconciliation.

Pipelines are submitted through `reliability.sagas.submit_pipeline`; reconciliation by the tool
through `reliability.reconcile`; jobs through `reliability.jobs`.
"""

from __future__ import annotations

import re

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from console.models import Role, Team
from console.tenancy import has_role
from lib.egress import EgressRefused, check_url
from lib.endpoints import endpoint_of
from lib.sealing import seal
from registry.mcp_import import ImportResult, import_mcp_server
from reliability.models import (
    Credential,
    CredentialAction,
    CredentialAudit,
    CredentialBinding,
    McpServer,
    McpServerAction,
    McpServerEvent,
    McpServerStatus,
    McpToolPin,
    McpTransport,
    ReconciliationItem,
)
from reliability.reconcile import AlreadyResolved, resolve_reconciliation

__all__ = [
    "AlreadyResolved",
    "McpServerRefused",
    "approve_mcp_server",
    "approve_tool_change",
    "can_review_tool_change",
    "bind_credential",
    "decline_mcp_server",
    "import_mcp_tools",
    "propose_mcp_server",
    "delete_credential",
    "register_mcp_server",
    "resolve_item",
    "save_credential",
    "share_mcp_server",
    "unbind_credential",
    "unshare_mcp_server",
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
    """A platform admin (or an operator's command) registers or updates a server: approved at once, as a
    platform admin's namespace assignment is. Teams propose theirs with `propose_mcp_server`."""
    server, _ = McpServer.objects.get_or_create(name=name, defaults={"transport": transport})
    server.transport, server.url, server.command = transport, url, command
    server.status = McpServerStatus.APPROVED
    server.set_headers(headers or {})
    server.save()
    return server


# --- MCP servers that teams propose and a second person reviews ----------------------------------
class McpServerRefused(Exception):
    """The proposal or review cannot happen as asked; the message says why."""


def _require_teammate(team: Team, user, what: str) -> None:
    if not (user.is_superuser or team.members.filter(pk=user.pk).exists()):
        raise PermissionDenied(f"Only members of {team.slug} (or a platform admin) {what}.")


@transaction.atomic
def propose_mcp_server(*, team: Team, name: str, url: str, headers: dict[str, str] | None = None, by) -> McpServer:
    """A member of `team` proposes a streamable-HTTP server for the team's skills. Its URL must pass the
    egress rules now (and is checked again on every connection); nothing calls it until another person
    approves. stdio servers run a command on Airlock's own machines: only operators register those."""
    _require_teammate(team, by, "propose MCP servers for it")
    try:
        check_url(url)
    except EgressRefused as exc:
        raise McpServerRefused(f"The URL is refused: {exc}.") from None
    if McpServer.objects.filter(name=name).exists():
        raise McpServerRefused(f"An MCP server named {name} already exists; choose another name.")
    try:
        with transaction.atomic():  # a savepoint: a concurrent proposal may take the name first
            server = McpServer(name=name, team=team, transport=McpTransport.HTTP, url=url, proposed_by=by)
            server.set_headers(headers or {})
            server.save()
    except IntegrityError:
        raise McpServerRefused(f"An MCP server named {name} was just proposed; choose another name.") from None
    return server


def _review(server: McpServer, *, by, to: str) -> McpServer:
    """Move a proposed server to `to` (one conditional UPDATE from proposed): a second person only."""
    if server.team is None:
        if not by.is_superuser:
            raise PermissionDenied("Only a platform admin reviews a server that belongs to no team.")
    else:
        _require_teammate(server.team, by, "review its MCP servers")
    if server.proposed_by_id == by.pk:
        raise McpServerRefused("You proposed this server: another member of the team or a platform admin reviews it.")
    won = McpServer.objects.filter(pk=server.pk, status=McpServerStatus.PROPOSED).update(
        status=to, reviewed_by=by, reviewed_at=timezone.now()
    )
    server.refresh_from_db()
    if not won:
        raise McpServerRefused(f"{server.name} is not waiting for review (it is {server.get_status_display()}).")
    return server


def can_review_mcp_server(server: McpServer, user, *, team_ids: set[int]) -> bool:
    """Whether the page offers `user` (a member of `team_ids`) Approve and Decline; the services check again."""
    if server.status != McpServerStatus.PROPOSED or server.proposed_by_id == user.pk:
        return False
    return user.is_superuser or server.team_id in team_ids


def approve_mcp_server(*, server: McpServer, by) -> McpServer:
    """From now on `mcp://<name>/...` calls reach it and its tools can be imported."""
    return _review(server, by=by, to=McpServerStatus.APPROVED)


def decline_mcp_server(*, server: McpServer, by) -> McpServer:
    return _review(server, by=by, to=McpServerStatus.DECLINED)


def can_share_mcp_server(server: McpServer, user) -> bool:
    """Whether `user` may share the server with other teams (its headers are its team's credentials): a
    maintainer of its team, or a platform admin (who alone shares a server that belongs to no team)."""
    if server.team is None:
        return user.is_superuser
    return server.team.is_maintained_by(user)


def _require_sharer(server: McpServer, user) -> None:
    if not can_share_mcp_server(server, user):
        owner = f"maintainers of {server.team.slug}" if server.team is not None else "a platform admin"
        raise PermissionDenied(f"Only {owner} (or a platform admin) share {server.name} with other teams.")


def _server_audit(*, server: McpServer, action: str, team: Team, by) -> McpServerEvent:
    return McpServerEvent.objects.create(
        server=server,
        server_name=server.name,
        action=action,
        team=team,
        team_label=team.slug,
        actor=by,
        actor_label=by.get_username(),
    )


@transaction.atomic
def share_mcp_server(*, server: McpServer, team: Team, by) -> McpServer:
    """Let skills of `team` call `server`, with the server's own headers: its owner's credentials."""
    _require_sharer(server, by)
    server = McpServer.objects.select_for_update(of=("self",)).select_related("team").get(pk=server.pk)
    if team.pk == server.team_id:
        raise McpServerRefused(f"{server.name} belongs to {team.slug}: its skills may already call it.")
    if server.shared_with.filter(pk=team.pk).exists():
        raise McpServerRefused(f"{server.name} is already shared with {team.slug}.")
    server.shared_with.add(team)
    _server_audit(server=server, action=McpServerAction.SHARED, team=team, by=by)
    return server


@transaction.atomic
def unshare_mcp_server(*, server: McpServer, team: Team, by) -> McpServer:
    """From the next call on, skills of `team` may no longer call `server` (execution checks every call)."""
    _require_sharer(server, by)
    server = McpServer.objects.select_for_update(of=("self",)).select_related("team").get(pk=server.pk)
    if not server.shared_with.filter(pk=team.pk).exists():
        raise McpServerRefused(f"{server.name} is not shared with {team.slug}.")
    server.shared_with.remove(team)
    _server_audit(server=server, action=McpServerAction.UNSHARED, team=team, by=by)
    return server


def import_mcp_tools(*, server: McpServer, by) -> ImportResult:
    """A member of the server's team imports its tools as unconfirmed drafts: from an approved server only."""
    if server.team is None:
        raise McpServerRefused(f"{server.name} belongs to no team: an operator imports with manage.py import_mcp.")
    _require_teammate(server.team, by, "import its tools")
    if server.status != McpServerStatus.APPROVED:
        raise McpServerRefused(f"{server.name} is {server.get_status_display()}: only an approved server is imported.")
    return import_mcp_server(
        target=server.url, headers=server.headers(), team=server.team, author=by, server_name=server.name
    )


def can_review_tool_change(server: McpServer, user) -> bool:
    """A member of the server's team (a platform admin for a server of no team) reviews its tools' changes."""
    if server.team is None:
        return user.is_superuser
    return user.is_superuser or server.team.members.filter(pk=user.pk).exists()


@transaction.atomic
def approve_tool_change(*, pin: McpToolPin, by) -> McpToolPin:
    """Pin what the server now serves for this tool (after reading the diff): calls reach it again."""
    if not can_review_tool_change(pin.server, by):
        raise PermissionDenied(f"Only members of {pin.server.owner_label} (or a platform admin) review its tools.")
    pin = McpToolPin.objects.select_for_update().select_related("server").get(pk=pin.pk)
    if not pin.pending_sha256:
        raise McpServerRefused(f"{pin.server.name}/{pin.tool} has no change waiting for review.")
    pin.definition, pin.sha256 = pin.pending_definition, pin.pending_sha256
    pin.pinned_by_label, pin.pinned_at = by.username, timezone.now()
    pin.pending_definition, pin.pending_sha256, pin.pending_since, pin.pending_findings = None, "", None, []
    pin.save()
    return pin


def resolve_item(*, item: ReconciliationItem, resolution: str, note: str, user) -> ReconciliationItem:
    """An owner's decision on an unknown outcome: the call, run and trace are updated."""
    return resolve_reconciliation(item=item, resolution=resolution, note=note, user=user, source="owner")
