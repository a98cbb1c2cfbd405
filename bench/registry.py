"""Registry at catalog scale: 10,000 skill versions.

Figures: time to build and sign a snapshot of the whole catalog, and discovery latency
(p50/p95/p99) of `GET /api/v1/skills/search` through the test client, on SQLite and, when
DATABASE_URL points at PostgreSQL, on PostgreSQL too. Each database runs in its own process
against a throwaway test database, so development data is never touched.

    .venv/bin/python -m bench.registry
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

from bench.common import Figure, print_table, summary

SKILLS = int(os.environ.get("BENCH_REGISTRY_SKILLS", "5000"))  # two versions each: 10,000 skill versions
SEARCHES = int(os.environ.get("BENCH_REGISTRY_SEARCHES", "300"))
NAMESPACES = [
    "billing",
    "customer",
    "orders",
    "support",
    "docs",
    "admin",
    "crm",
    "hr",
    "finance",
    "inventory",
    "shipping",
    "marketing",
    "analytics",
    "security",
    "identity",
    "payments",
    "tickets",
    "email",
    "calendar",
    "files",
    "search",
    "devops",
    "github",
    "jira",
    "slack",
]
VERBS = [
    "get",
    "list",
    "search",
    "create",
    "update",
    "archive",
    "send",
    "read",
    "export",
    "import",
    "sync",
    "approve",
    "cancel",
    "schedule",
    "summarize",
]
OBJECTS = [
    "invoice",
    "refund",
    "order",
    "customer",
    "profile",
    "ticket",
    "email",
    "report",
    "user",
    "payment",
    "shipment",
    "document",
    "event",
    "issue",
    "message",
    "subscription",
    "contract",
    "lead",
    "asset",
    "page",
]
QUERIES = [
    "refund a customer",
    "list orders",
    "search documentation",
    "send an email",
    "archive ticket",
    "export report",
    "customer profile",
    "cancel subscription",
    "update shipment",
    "payment status",
    "schedule event",
    "summarize document",
    "zebra crossing",
    "create invoice",
    "read message",
    "github issue",
    "sync contacts",
    "approve contract",
    "import leads",
    "security report",
]


def _manifest(name: str, version: str, rng: random.Random) -> dict:
    tenants = rng.choice([["*"], ["*"], ["acme"], ["globex"]])
    roles = rng.sample(["support", "billing", "developer"], k=rng.randint(1, 2))
    verb, obj = name.rsplit(".", 1)[1].split("_")[:2]
    return {
        "skill_id": "skl_" + name.replace(".", "_"),
        "name": name,
        "version": version,
        "description": f"{verb.capitalize()} a {obj} in {name.split('.')[0]}. Use when the user asks to {verb} "
        f"their {obj}. No side effects. Returns the {obj}; empty when not found.",
        "input_schema": {
            "type": "object",
            "properties": {f"{obj}_id": {"type": "string"}},
            "required": [f"{obj}_id"],
            "additionalProperties": False,
        },
        "output_schema": {"type": "object", "properties": {obj: {"type": "object", "description": "The record."}}},
        "risk": {"effect": "read", "data_classification": "internal", "approval": "not_required"},
        "permissions": {"allowed_agent_roles": roles, "allowed_tenants": tenants, "oauth_scopes": []},
        "execution": {
            "adapter": f"python:demo.{verb}_{obj}",
            "timeout_ms": 5000,
            "max_attempts": 1,
            "result_limit_bytes": 8192,
        },
        "ownership": {"team": "bench-team"},
    }


def _build_catalog() -> None:
    from django.utils import timezone

    from console.models import Team
    from registry.models import Skill, SkillVersion, refresh_search_vectors

    rng = random.Random(7)
    team = Team.objects.create(slug="bench-team", name="Bench team")
    skills = []
    for i in range(SKILLS):
        name = f"{NAMESPACES[i % len(NAMESPACES)]}.{rng.choice(VERBS)}_{rng.choice(OBJECTS)}_{i}"
        skills.append(
            Skill(skill_id="skl_" + name.replace(".", "_"), name=name, namespace=name.split(".")[0], owner_team=team)
        )
    Skill.objects.bulk_create(skills, batch_size=1000)
    now = timezone.now()
    versions = []
    for skill in Skill.objects.all():
        for minor in (0, 1):
            manifest = _manifest(skill.name, f"1.{minor}.0", rng)
            versions.append(
                SkillVersion(
                    skill=skill,
                    version=manifest["version"],
                    major=1,
                    minor=minor,
                    patch=0,
                    status="active",
                    manifest=manifest,
                    effect="read",
                    data_classification="internal",
                    description=manifest["description"],
                    published_at=now,
                    search_text=" ".join(
                        [skill.name, skill.name.replace(".", " ").replace("_", " "), manifest["description"]]
                    ),
                )
            )
    SkillVersion.objects.bulk_create(versions, batch_size=1000)
    refresh_search_vectors(SkillVersion.objects.all())


def _measure_one() -> list[dict]:
    """Runs inside a child process configured for one database."""
    from bench.common import setup_django

    setup_django()
    from django.conf import settings
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases

    settings.ALLOWED_HOSTS = ["*"]
    setup_test_environment()
    vendor = "PostgreSQL" if settings.DATABASES["default"]["ENGINE"].endswith("postgresql") else "SQLite"
    old_config = setup_databases(verbosity=0, interactive=False)
    try:
        from django.urls import reverse
        from rest_framework.test import APIClient

        from console.models import Tenant
        from console.services import create_agent
        from registry import discovery
        from registry.models import SkillVersion
        from registry.snapshots import publish_snapshot

        discovery.DISCOVERY_FILTERS.clear()  # manifest permissions only: grants belong to the policies bench
        started = time.perf_counter()
        _build_catalog()
        build_catalog_s = time.perf_counter() - started
        count = SkillVersion.objects.count()

        started = time.perf_counter()
        snapshot = publish_snapshot(reason="bench")
        snapshot_ms = (time.perf_counter() - started) * 1000
        size_kb = len(json.dumps(snapshot.body)) / 1024

        acme = Tenant.objects.create(slug="acme", name="Acme")
        _, key = create_agent(tenant=acme, name="bench-bot", role="support")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        url = reverse("registry_api:skill-search")
        started = time.perf_counter()
        first = client.get(url, {"q": "refund a customer"})
        cold_ms = (time.perf_counter() - started) * 1000
        assert first.status_code == 200, first.content
        samples = []
        for i in range(SEARCHES):
            query = QUERIES[i % len(QUERIES)]
            started = time.perf_counter()
            response = client.get(url, {"q": query, "limit": 10})
            samples.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        stats = summary(samples)
        return [
            {"name": f"{vendor}: catalog size", "value": count, "unit": "versions"},
            {"name": f"{vendor}: bulk-load catalog", "value": build_catalog_s, "unit": "s"},
            {"name": f"{vendor}: build + sign snapshot ({size_kb:,.0f} KiB)", "value": snapshot_ms, "unit": "ms"},
            {"name": f"{vendor}: search, first call (permitted set built)", "value": cold_ms, "unit": "ms"},
            {"name": f"{vendor}: search p50", "value": stats["p50"], "unit": "ms"},
            {"name": f"{vendor}: search p95", "value": stats["p95"], "unit": "ms"},
            {"name": f"{vendor}: search p99", "value": stats["p99"], "unit": "ms"},
        ]
    finally:
        teardown_databases(old_config, verbosity=0)


def _child(database_url: str | None) -> list[Figure]:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    env.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    done = subprocess.run(
        [sys.executable, "-m", "bench.registry", "--one"], env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.registry --one failed:\n{done.stderr[-3000:]}")
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    return [Figure(name=row["name"], value=row["value"], unit=row["unit"]) for row in rows]


def run() -> list[Figure]:
    figures = _child(None)
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        figures += _child(database_url)
    return figures


if __name__ == "__main__":
    if "--one" in sys.argv:
        print(json.dumps(_measure_one()))
    else:
        print_table(run(), "Registry: 10,000 skill versions")
