"""Demo grants and a tenant policy for `seed_demo` (idempotent)."""

from __future__ import annotations

from policies import services
from policies.models import Grant, Policy, Scope

GRANTS = {
    ("acme", "support"): ["customer.*", "orders.*", "billing.*", "support.*", "docs.*", "drafts.*", "admin.*"],
    ("acme", "developer"): ["docs.*"],
    ("globex", "billing"): ["billing.*", "customer.*"],
}

ACME_RULES = [
    {
        "id": "mail-outside",
        "verdict": "confirm",
        "condition": 'skill.name == "support.send_email" && !args.to.endsWith("@acme.example")',
        "reason": "Email to a recipient outside acme.example needs a person's confirmation.",
    },
    {
        "id": "admin-tainted",
        "verdict": "deny",
        "condition": 'skill.namespace == "admin" && run.tainted',
        "reason": "Admin actions are refused once the run has read untrusted content.",
    },
    {
        "id": "big-refunds",
        "verdict": "confirm",
        "condition": 'skill.name == "billing.create_refund_request" && has(args.amount_cents) '
        "&& args.amount_cents > 50000",
        "reason": "Refunds over 500.00 need a supervisor.",
    },
]
ACME_TESTS = [
    (
        "outside recipient asks",
        {
            "skill": {"name": "support.send_email", "effect": "write", "namespace": "support"},
            "args": {"to": "ada@example.org"},
        },
        "confirm",
    ),
    (
        "admin on tainted run refused",
        {
            "skill": {"name": "admin.delete_user_permanently", "effect": "write", "namespace": "admin"},
            "run": {"tainted": True},
        },
        "deny",
    ),
    ("plain read allowed", {}, "allow"),
]


def seed(context) -> None:
    admin = context.users.get("adam") or context.users.get("root")
    created = 0
    for (slug, role), patterns in GRANTS.items():
        tenant = context.tenants[slug]
        for pattern in patterns:
            if not Grant.objects.active().filter(tenant=tenant, agent_role=role, skill_pattern=pattern).exists():
                services.create_grant(tenant=tenant, skill_pattern=pattern, agent_role=role, granted_by=admin)
                created += 1
    if created:
        context.lines.append(f"policies: {created} demo grants")
    acme = context.tenants["acme"]
    if not Policy.objects.filter(scope=Scope.TENANT, tenant=acme, name="Acme support guardrails").exists():
        policy = services.create_policy(
            name="Acme support guardrails", scope=Scope.TENANT, tenant=acme, created_by=admin, rules=ACME_RULES
        )
        for name, call, verdict in ACME_TESTS:
            services.add_policy_test(policy=policy, name=name, call=call, expected_verdict=verdict, user=admin)
        services.publish_policy_version(
            version=services.draft_of(policy),
            user=admin,
            reason="demo: outside mail confirms, admin on tainted runs denied",
        )
        context.lines.append("policies: published 'Acme support guardrails' (tenant acme)")
