"""Tenant credentials at execution: looked up by name, checked against the tenant's bindings, unsealed in
memory, handed to the adapter only.

The value travels in the execution trail (never in the context, the arguments, a span or a log
line) and adapters read it through `attached_headers()` while they build their request. A
credential goes only where its tenant bound it (`CredentialBinding`: the skill's name and the
endpoint of the request); anywhere else the call fails as `authorization/credential_not_bound`
before any request is made, whatever the skill's manifest says.
"""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from lib.endpoints import endpoint_of
from runs.errors import NotPermitted, Unavailable
from runs.plane import execution
from runs.plane.models import Credential, CredentialBinding


def credential_name(manifest: dict) -> str:
    return str(manifest.get("execution", {}).get("credential") or "")


def is_bound(*, tenant_id: int, name: str, skill_name: str, target: str) -> bool:
    """Whether the tenant lets its credential `name` go with `skill_name` to the endpoint of `target`."""
    endpoint = endpoint_of(target)
    bindings = CredentialBinding.objects.filter(tenant_id=tenant_id, credential_name=name, endpoint=endpoint)
    return any(binding.covers(skill_name=skill_name, endpoint=endpoint) for binding in bindings)


def resolve_headers(*, manifest: dict, tenant_slug: str, end_user: str, target: str | None = None) -> dict[str, str]:
    """The headers a request to `target` (default: the skill's adapter) must carry for its tenant and end user.

    Refuses when the tenant has no such credential (`unavailable/credential_missing`) or has not
    bound it to this skill at this endpoint (`authorization/credential_not_bound`).
    """
    name = credential_name(manifest)
    if not name:
        return {}
    rows = list(
        Credential.objects.filter(Q(end_user=end_user) | Q(end_user=""), tenant__slug=tenant_slug, name=name).order_by(
            "-end_user"
        )[:1]
    )
    if not rows:
        raise Unavailable(
            f"This tenant has not configured the credential {name} that the skill needs; "
            "a tenant admin can add it in the console.",
            code="credential_missing",
        )
    credential = rows[0]
    skill_name = str(manifest.get("name", ""))
    target = target if target is not None else str(manifest.get("execution", {}).get("adapter", ""))
    if not is_bound(tenant_id=credential.tenant_id, name=name, skill_name=skill_name, target=target):
        raise NotPermitted(
            f"This tenant has not bound its credential {name} to {skill_name} at "
            f"{endpoint_of(target)}; nothing was sent. A tenant admin can bind it on the "
            "credentials page.",
            code="credential_not_bound",
        )
    Credential.objects.filter(pk=credential.pk).update(last_used_at=timezone.now())
    return {credential.header: credential.header_value()}


def attached_headers() -> dict[str, str]:
    """The credential headers of the call running in this thread (empty outside an execution)."""
    trail = execution.current_trail()
    return dict(trail.headers) if trail is not None else {}
