"""Tenant credentials at execution: looked up by name, unsealed in memory, handed to the adapter only.

The value travels in the execution trail (never in the context, the arguments, a span or a log
line) and adapters read it through `attached_headers()` while they build their request.
"""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from reliability.models import Credential
from runs.errors import Unavailable


def credential_name(manifest: dict) -> str:
    return str(manifest.get("execution", {}).get("credential") or "")


def resolve_headers(*, manifest: dict, tenant_slug: str, end_user: str) -> dict[str, str]:
    """The headers a call must carry for its tenant (and end user); refuses when the tenant has none."""
    name = credential_name(manifest)
    if not name:
        return {}
    rows = list(Credential.objects.filter(Q(end_user=end_user) | Q(end_user=""), tenant__slug=tenant_slug,
                                          name=name).order_by("-end_user")[:1])
    if not rows:
        raise Unavailable(f"This tenant has not configured the credential {name} that the skill needs; "
                          "a tenant admin can add it in the console.", code="credential_missing")
    credential = rows[0]
    Credential.objects.filter(pk=credential.pk).update(last_used_at=timezone.now())
    return {credential.header: credential.header_value()}


def attached_headers() -> dict[str, str]:
    """The credential headers of the call running in this thread (empty outside an execution)."""
    from reliability.execution import current_trail

    trail = current_trail()
    return dict(trail.headers) if trail is not None else {}
