"""A real gate world for end-to-end approval tests: skills needing approval, grants, a snapshot."""

from registry.snapshots import publish_snapshot
from tests.runs.factories import grant, make_skill

REFUND_SCHEMA = {
    "type": "object",
    "properties": {"customer_id": {"type": "string"}, "amount_cents": {"type": "integer", "minimum": 1},
                   "card_token": {"type": "string"}},
    "required": ["customer_id", "amount_cents"],
    "additionalProperties": False,
}


def build_refund_world(tenant) -> dict:
    import tests.approvals.worker_tools  # noqa: F401 - registers approvals_test.refund

    skills = {
        "refund": make_skill("billing.create_refund", effect="external", approval="required", schema=REFUND_SCHEMA,
                             adapter="python:approvals_test.refund", publish=False),
        "revoke": make_skill("iam.revoke_access", effect="destructive", approval="two_person",
                             schema=REFUND_SCHEMA, adapter="python:approvals_test.refund", publish=False),
    }
    grant(tenant, "billing.*")
    grant(tenant, "iam.*")
    publish_snapshot(reason="approvals end-to-end world")
    return skills
