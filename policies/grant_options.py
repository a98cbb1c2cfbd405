"""What a tenant admin can grant: the agent roles of the tenant, and the skills and namespaces offered to it.

The grant form picks from these and refuses anything else, so a typo is a field error instead of a grant
that covers nothing; the preview shows which current skills a pattern covers.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.models import Agent, Tenant
from policies.models import pattern_covers
from registry.models import Effect, SkillVersion, VersionStatus
from registry.offering import offers_role, offers_tenant


@dataclass(frozen=True)
class OfferedSkill:
    """The current version of a skill offered to a tenant, as the grant form shows it."""

    name: str
    namespace: str
    version: str
    effect: str
    deprecated: bool
    manifest: dict

    @property
    def is_destructive(self) -> bool:
        return self.effect == Effect.DESTRUCTIVE

    def offered_to_role(self, agent_role: str) -> bool:
        return offers_role(self.manifest, agent_role)


def agent_roles(tenant: Tenant) -> list[str]:
    """The roles of the tenant's agents that are not revoked: the only roles a grant can reach."""
    return sorted(set(Agent.objects.active().filter(tenant=tenant).values_list("role", flat=True)))


def offered_skills(tenant: Tenant) -> list[OfferedSkill]:
    """Each skill's current version (the newest active one, else the newest deprecated one), if it is
    offered to the tenant."""
    versions = (
        SkillVersion.objects.filter(status__in=[VersionStatus.ACTIVE, VersionStatus.DEPRECATED])
        .select_related("skill")
        .order_by("skill__name", "-major", "-minor", "-patch")
    )
    current: dict[str, SkillVersion] = {}
    for version in versions:
        held = current.get(version.skill.name)
        if held is None or (held.status != VersionStatus.ACTIVE and version.status == VersionStatus.ACTIVE):
            current[version.skill.name] = version
    return [
        OfferedSkill(
            name=version.skill.name,
            namespace=version.skill.namespace,
            version=version.version,
            effect=version.effect,
            deprecated=version.status == VersionStatus.DEPRECATED,
            manifest=version.manifest,
        )
        for version in current.values()
        if offers_tenant(version.manifest, tenant.slug)
    ]


def namespace_patterns(skills: list[OfferedSkill]) -> list[str]:
    return sorted({f"{skill.namespace}.*" for skill in skills})


def covered_by(pattern: str, skills: list[OfferedSkill]) -> list[OfferedSkill]:
    return [skill for skill in skills if pattern_covers(pattern, skill.name)]


def reaches_nothing(pattern: str, agent_role: str, skills: list[OfferedSkill]) -> bool:
    """Whether a grant of `pattern` to `agent_role` lets its agents call no current skill."""
    return not any(skill.offered_to_role(agent_role) for skill in covered_by(pattern, skills))
