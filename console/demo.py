"""Demo data for `seed_demo`: tenants, people with each role, an owner team and agents.

Each app adds its own demo data through a `seed(context)` function, listed in airlock.demo.DEMO_SEEDERS;
every seeder is idempotent, so `seed_demo` can run at every `make run`.
"""

from dataclasses import dataclass, field

from django.contrib.auth import get_user_model

from console.models import Agent, Membership, Role, Team, Tenant
from console.services import create_agent

DEMO_PASSWORD = "airlock-demo"

PEOPLE = [
    # username, tenant memberships {slug: roles}, teams, superuser
    ("alice", {"acme": [Role.APPROVER, Role.VIEWER], "globex": [Role.VIEWER]}, [], False),
    ("bob", {"acme": [Role.APPROVER, Role.VIEWER]}, [], False),
    (
        "olivia",
        {"acme": [Role.VIEWER], "globex": [Role.VIEWER]},
        ["support-tools", "billing-platform", "developer-platform"],
        False,
    ),
    ("adam", {"acme": [Role.ADMIN, Role.VIEWER]}, [], False),
    ("gina", {"globex": [Role.APPROVER, Role.ADMIN, Role.VIEWER]}, [], False),
    ("audrey", {"acme": [Role.AUDITOR]}, [], False),
    ("root", {}, [], True),
]
MAINTAINERS = {"olivia"}  # maintain every team they are in: they add and remove teammates
AGENTS = [("acme", "support-bot", "support"), ("acme", "docs-bot", "developer"), ("globex", "billing-bot", "billing")]


@dataclass
class DemoContext:
    tenants: dict[str, Tenant] = field(default_factory=dict)
    users: dict = field(default_factory=dict)
    teams: dict[str, Team] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    new_keys: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


def seed(context: DemoContext) -> None:
    User = get_user_model()
    for slug, name in [("acme", "Acme Corp"), ("globex", "Globex")]:
        context.tenants[slug], _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    for slug, name in [
        ("support-tools", "Support tools"),
        ("billing-platform", "Billing platform"),
        ("developer-platform", "Developer platform"),
    ]:
        context.teams[slug], _ = Team.objects.get_or_create(
            slug=slug, defaults={"name": name, "email": f"{slug}@example.com"}
        )
    for username, memberships, teams, superuser in PEOPLE:
        user, created = User.objects.get_or_create(
            username=username,
            defaults={"email": f"{username}@example.com", "is_superuser": superuser, "is_staff": superuser},
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        context.users[username] = user
        for slug, roles in memberships.items():
            for role in roles:
                Membership.objects.get_or_create(tenant=context.tenants[slug], user=user, role=role)
        for team in teams:
            context.teams[team].members.add(user)
            if username in MAINTAINERS:
                context.teams[team].maintainers.add(user)
    for slug, name, role in AGENTS:
        agent = Agent.objects.filter(tenant=context.tenants[slug], name=name).first()
        if agent is None:
            agent, key = create_agent(tenant=context.tenants[slug], name=name, role=role)
            context.new_keys[f"{slug}/{name}"] = key
        context.agents[f"{slug}/{name}"] = agent
