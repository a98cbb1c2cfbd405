"""A real gate world for approval tests: skills needing approval whose downstream is the real python
adapter `approvals_test.refund` (tests/approvals/worker_tools.py), grants, a published snapshot."""

from console.models import Team
from registry.models import Skill, SkillVersion
from registry.snapshots import publish_snapshot
from tests.runs.factories import grant, manifest

DOWNSTREAM = "python:approvals_test.refund"
TEAM_NAMES = {"support-tools": "Support tools", "billing-platform": "Billing"}

REFUND_SCHEMA = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string"},
        "amount_cents": {"type": "integer", "minimum": 1},
        "card_token": {"type": "string", "writeOnly": True},
    },  # sensitive: masked, redacted at rest
    "required": ["customer_id", "amount_cents"],
    "additionalProperties": False,
}


def downstream_manifest(
    name: str,
    *,
    schema: dict,
    effect: str = "external",
    approval: str = "required",
    ttl_seconds: int | None = None,
    version: str = "1.0.0",
    team_slug: str = "support-tools",
) -> dict:
    """A manifest executed by the refund downstream, which honours idempotency keys (so it says
    `execution.idempotent`)."""
    body = manifest(name, effect=effect, approval=approval, schema=schema, adapter=DOWNSTREAM, version=version)
    body["execution"]["idempotent"] = True
    body["ownership"]["team"] = team_slug
    if ttl_seconds is not None:
        body["risk"]["approval_ttl_seconds"] = ttl_seconds
    return body


def create_active_version(body: dict, *, publish: bool = True) -> SkillVersion:
    """The active skill version of a manifest, published in a new snapshot unless `publish` is False."""
    import tests.approvals.worker_tools  # noqa: F401 - registers approvals_test.refund

    name, team_slug = body["name"], body["ownership"]["team"]
    team = Team.objects.get_or_create(slug=team_slug, defaults={"name": TEAM_NAMES.get(team_slug, team_slug)})[0]
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
        status="active",
        manifest=body,
        effect=body["risk"]["effect"],
        data_classification=body["risk"]["data_classification"],
    )
    if publish:
        publish_snapshot(reason=f"approvals test {name}")
    return version


def build_refund_world(tenant) -> dict:
    skills = {
        "refund": create_active_version(
            downstream_manifest("billing.create_refund", schema=REFUND_SCHEMA), publish=False
        ),
        "revoke": create_active_version(
            downstream_manifest("iam.revoke_access", effect="destructive", approval="two_person", schema=REFUND_SCHEMA),
            publish=False,
        ),
    }
    grant(tenant, "billing.*")
    grant(tenant, "iam.*")
    publish_snapshot(reason="approvals end-to-end world")
    return skills
