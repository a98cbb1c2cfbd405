"""Small factories for gate tests: skills with manifests, grants, policies and runs."""

from __future__ import annotations

from console.models import Team
from policies.models import Grant, Policy, PolicyVersion
from registry.models import Skill, SkillVersion
from registry.snapshots import publish_snapshot


def manifest(
    name: str,
    *,
    effect: str = "read",
    schema: dict | None = None,
    adapter: str | None = None,
    approval: str = "not_required",
    untrusted_output: bool = False,
    roles: list[str] | None = None,
    tenants: list[str] | None = None,
    scopes: list[str] | None = None,
    data: str = "internal",
    result_limit_bytes: int = 16384,
    timeout_ms: int = 5000,
    version: str = "1.0.0",
    rate_limit_per_minute: int | None = None,
    errors: list[dict] | None = None,
    extra: dict | None = None,
    cost: dict | None = None,
) -> dict:
    body = {
        "skill_id": "skl_" + name.replace(".", "_"),
        "name": name,
        "version": version,
        "description": f"Test skill {name} used by the gate tests.",
        "input_schema": schema or {"type": "object", "properties": {}, "additionalProperties": True},
        "output_schema": {"type": "object"},
        "risk": {
            "effect": effect,
            "data_classification": data,
            "approval": approval,
            "untrusted_output": untrusted_output,
        },
        "permissions": {
            "allowed_agent_roles": roles or ["*"],
            "allowed_tenants": tenants or ["*"],
            "oauth_scopes": scopes or [],
        },
        "execution": {
            "adapter": adapter or f"python:test.{name.rsplit('.', 1)[-1]}",
            "timeout_ms": timeout_ms,
            "max_attempts": 1,
            "result_limit_bytes": result_limit_bytes,
        },
        "ownership": {"team": "support-tools"},
    }
    if rate_limit_per_minute is not None:
        body["execution"]["rate_limit_per_minute"] = rate_limit_per_minute
    if errors is not None:
        body["errors"] = errors
    if cost is not None:
        body["cost"] = cost
    return {**body, **(extra or {})}


def make_skill(
    name: str,
    *,
    status: str = "active",
    team: Team | None = None,
    publish: bool = True,
    replacement: Skill | None = None,
    **kwargs,
) -> SkillVersion:
    team = team or Team.objects.get_or_create(slug="support-tools", defaults={"name": "Support tools"})[0]
    body = manifest(name, **kwargs)
    skill, _ = Skill.objects.get_or_create(
        name=name, defaults={"skill_id": body["skill_id"], "namespace": name.split(".")[0], "owner_team": team}
    )
    major, minor, patch = (int(p) for p in body["version"].split("."))
    version = SkillVersion.objects.create(
        skill=skill,
        version=body["version"],
        major=major,
        minor=minor,
        patch=patch,
        status=status,
        manifest=body,
        effect=body["risk"]["effect"],
        data_classification=body["risk"]["data_classification"],
        replacement=replacement,
    )
    if publish:
        publish_snapshot(reason=f"test {name}")
    return version


def grant(tenant, pattern: str, role: str = "support", **kwargs) -> Grant:
    return Grant.objects.create(tenant=tenant, skill_pattern=pattern, agent_role=role, **kwargs)


def published_policy(
    rules: list[dict],
    *,
    scope: str = "platform",
    tenant=None,
    skill_name: str = "",
    name: str = "test policy",
    status: str = "published",
) -> Policy:
    policy = Policy.objects.create(name=name, scope=scope, tenant=tenant, skill_name=skill_name)
    PolicyVersion.objects.create(policy=policy, number=1, status=status, rules=rules)
    return policy


def rule(rule_id: str, verdict: str, condition: str = "true", reason: str = "") -> dict:
    return {"id": rule_id, "verdict": verdict, "condition": condition, "reason": reason or f"{rule_id} says {verdict}"}


def run_for(agent, **kwargs):
    """A run of `agent` pinned to the latest snapshot, created without the API."""
    from registry.snapshots import latest_snapshot
    from runs.models import Run

    return Run.objects.create(tenant=agent.tenant, agent=agent, end_user="u-1", snapshot=latest_snapshot(), **kwargs)


def tenant_policy(tenant, rules: list[dict] | None = None) -> Policy:
    policy = Policy.objects.create(name="tenant rules", scope="tenant", tenant=tenant)
    PolicyVersion.objects.create(policy=policy, number=1, status="draft", rules=rules or [])
    return policy
