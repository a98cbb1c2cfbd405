"""Small factories for registry tests: a valid manifest and a skill with one version in a status."""

import copy

from registry.models import Skill, SkillVersion, Team


def manifest(name: str = "docs.search_documentation", **overrides) -> dict:
    base = {
        "skill_id": "skl_" + name.replace(".", "_"),
        "name": name,
        "version": "1.0.0",
        "description": (
            "Search published product documentation. Use for product behaviour and API guidance. "
            "Read-only, no side effects. Returns ranked page summaries; an empty list means no page matched."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 3, "maxLength": 300, "description": "Search text."},
                "product_area": {"type": "string", "enum": ["api", "sdk", "cli", "ui"]},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "output_schema": {
            "type": "object",
            "properties": {
                "results": {
                    "type": "array",
                    "description": "Ranked pages; empty when nothing matched.",
                    "items": {"type": "object", "properties": {"title": {"type": "string"}}},
                },
                "next_cursor": {"type": ["string", "null"], "description": "Pass back for the next page."},
            },
        },
        "risk": {
            "effect": "read",
            "data_classification": "public",
            "approval": "not_required",
            "untrusted_output": False,
        },
        "permissions": {
            "allowed_agent_roles": ["support", "developer"],
            "allowed_tenants": ["*"],
            "oauth_scopes": ["docs.read"],
        },
        "execution": {
            "adapter": "python:demo.search_documentation",
            "timeout_ms": 5000,
            "max_attempts": 2,
            "result_limit_bytes": 8192,
            "idempotent": True,
        },
        "ownership": {"team": "support-tools", "runbook": "https://runbooks.example/search-docs", "support_tier": "P2"},
    }
    result = copy.deepcopy(base)
    for dotted, value in overrides.items():
        target = result
        *parents, last = dotted.split("__")
        for part in parents:
            target = target[part]
        target[last] = value
    return result


def make_version(
    *, team: Team, name: str = "docs.search_documentation", version: str = "1.0.0", status: str = "active", **overrides
) -> SkillVersion:
    body = manifest(name, version=version, **overrides)
    skill, _ = Skill.objects.get_or_create(
        name=name, defaults={"skill_id": body["skill_id"], "namespace": name.rsplit(".", 1)[0], "owner_team": team}
    )
    major, minor, patch = (int(p) for p in version.split("."))
    return SkillVersion.objects.create(
        skill=skill,
        version=version,
        major=major,
        minor=minor,
        patch=patch,
        status=status,
        manifest=body,
        effect=body["risk"]["effect"],
        data_classification=body["risk"]["data_classification"],
        description=body["description"],
    )
