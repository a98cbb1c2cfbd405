"""The policies app's sections of the registry snapshot (listed in registry.snapshots.SNAPSHOT_SECTIONS)."""

from __future__ import annotations

from policies.models import Grant, PolicyVersion, VersionStatus


def grants_section() -> tuple[str, list[dict]]:
    grants = Grant.objects.active().select_related("tenant").order_by("tenant__slug", "agent_role", "skill_pattern")
    return "grants", [
        {
            "tenant": grant.tenant.slug,
            "skill": grant.skill_pattern,
            "agent_role": grant.agent_role,
            "oauth_scopes": sorted(grant.oauth_scopes or []),
            "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
        }
        for grant in grants
    ]


def policies_section() -> tuple[str, list[dict]]:
    versions = (
        PolicyVersion.objects.filter(status__in=[VersionStatus.PUBLISHED, VersionStatus.SHADOW])
        .select_related("policy__tenant")
        .order_by("policy_id", "number")
    )
    return "policies", [
        {
            "policy_id": version.policy_id,
            "name": version.policy.name,
            "scope": version.policy.scope,
            "tenant": version.policy.tenant.slug if version.policy.tenant_id else None,
            "skill": version.policy.skill_name or None,
            "version": version.number,
            "mode": version.status,
            "rules": version.rules,
        }
        for version in versions
    ]
