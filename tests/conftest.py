"""Shared fixtures: named personas in two tenants, agents with keys, and service markers.

Tests marked `postgres` or `redis` need the real service (DATABASE_URL / REDIS_URL). Without
it they are skipped with a summary line, unless AIRLOCK_REQUIRE_SERVICES=1, where a missing
service fails the run instead.
"""

import os
import tempfile

import pytest
from django.conf import settings
from django.core.cache import cache
from playwright.sync_api import expect
from rest_framework.test import APIClient

import airlock.asgi  # noqa: F401  built once here, from the real settings (see below)
import runs.demo_tools  # noqa: F401 - the suite asks for the demo's tools (see below)
from console.celery import app as celery_app
from console.models import Membership, Role, Team, Tenant
from console.services import create_agent
from lib import clock as airlock_clock
from registry.namespaces import assign_namespace

REQUIRE_SERVICES = os.environ.get("AIRLOCK_REQUIRE_SERVICES") == "1"
# The suite is a deployment that asks for the demo's tools (runs/tool_modules.py): most tests call `python:demo.*`
# functions. Django read its settings before this module, so the demo's module is imported above too; the
# workers and servers the suite starts inherit the variable.
os.environ["AIRLOCK_DEMO"] = "1"
# SDK clients started by tests (and their subprocesses) pin keys in a throwaway folder, not in ~/.config.
os.environ.setdefault("AIRLOCK_TRUST_DIR", tempfile.mkdtemp(prefix="airlock-trust-"))
# airlock.asgi wraps websockets in Channels' AllowedHostsOriginValidator, which reads ALLOWED_HOSTS when
# the module is first imported. Importing it above, before any test overrides settings, keeps a test
# that first imports it inside an override (the live server's) from changing it for every later test.

# Playwright's `expect` waits 5 s by default; two shared cores under CI can miss that while the condition is
# still coming. It returns as soon as the condition holds, so a generous ceiling costs a green run nothing.
expect.set_options(timeout=30_000)


def _using_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def pytest_collection_modifyitems(config, items):
    missing = {
        "postgres": None if _using_postgres() else "needs PostgreSQL: set DATABASE_URL=postgres://...",
        "redis": None if settings.REDIS_URL else "needs Redis: set REDIS_URL=redis://...",
    }
    for item in items:
        for marker, reason in missing.items():
            if reason and item.get_closest_marker(marker) is not None:
                if REQUIRE_SERVICES:
                    item.airlock_missing_service = reason
                else:
                    item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_setup(item):
    # A fixture added at collection time would never run, so fail here instead.
    reason = getattr(item, "airlock_missing_service", None)
    if reason:
        pytest.fail(f"A required service is missing (AIRLOCK_REQUIRE_SERVICES=1): {reason}", pytrace=False)


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter):
    """Every skip counted by what it needs, above pytest's own summary line: a run without Chromium,
    PostgreSQL, Redis or nginx says what it left out and how to include it."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = _skip_reason(report)
        reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return
    terminalreporter.write_sep("-", "skipped, by what they need", yellow=True)
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{count:>5} {reason}", yellow=True)
    if any("needs PostgreSQL" in r or "needs Redis" in r for r in reasons):
        terminalreporter.write_line(
            "Set DATABASE_URL and REDIS_URL (or run .ci/run) to include the PostgreSQL/Redis tests.", yellow=True
        )


@pytest.fixture(autouse=True)
def _isolated_services(settings, tmp_path):
    """Every test starts with an empty cache and eager Celery unless it asks for a real worker."""
    cache.clear()
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    settings.AIRLOCK_SIGNING_KEY_FILE = settings.VAR_DIR / "test_signing_key.pem"
    # The production hasher costs ~0.3 s per password; every persona has one.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    yield
    cache.clear()


@pytest.fixture
def clock():
    """Airlock's clock (lib/clock.py) under the test's control: `clock.advance(seconds)` moves it
    forward, and sleeps in the code under test advance it instead of waiting."""
    with airlock_clock.controlled():
        yield airlock_clock


@pytest.fixture
def acme(db) -> Tenant:
    return Tenant.objects.create(slug="acme", name="Acme Corp")


@pytest.fixture
def globex(db) -> Tenant:
    return Tenant.objects.create(slug="globex", name="Globex")


def make_user(username: str, *, tenant: Tenant | None = None, roles=(), superuser: bool = False):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(
        username=username,
        email=f"{username}@example.com",
        password="pw",
        is_superuser=superuser,
        is_staff=superuser,
    )
    for role in roles:
        Membership.objects.create(tenant=tenant, user=user, role=role)
    return user


@pytest.fixture
def approver(acme):
    return make_user("approver", tenant=acme, roles=[Role.APPROVER, Role.VIEWER])


@pytest.fixture
def second_approver(acme):
    return make_user("approver2", tenant=acme, roles=[Role.APPROVER, Role.VIEWER])


@pytest.fixture
def viewer(acme):
    return make_user("viewer", tenant=acme, roles=[Role.VIEWER])


@pytest.fixture
def auditor(acme):
    """Reads acme's decision history and what it links to; may change nothing."""
    return make_user("auditor", tenant=acme, roles=[Role.AUDITOR])


@pytest.fixture
def tenant_admin(acme):
    return make_user("admin", tenant=acme, roles=[Role.ADMIN, Role.VIEWER])


# The namespaces the suite's skills live in: the owners' team has them, as a platform admin would assign
# (tests/security/test_namespace_ownership.py covers unclaimed and other teams' namespaces).
OWNER_TEAM_NAMESPACES = ("admin", "billing", "crm", "customer", "docs", "drafts", "finance", "iam", "orders", "support")


@pytest.fixture
def owner_team(db) -> Team:
    team = Team.objects.create(slug="support-tools", name="Support tools")
    for namespace in OWNER_TEAM_NAMESPACES:
        assign_namespace(namespace=namespace, team=team)
    return team


@pytest.fixture
def owner(acme, owner_team):
    user = make_user("owner", tenant=acme, roles=[Role.VIEWER])
    owner_team.members.add(user)
    return user


@pytest.fixture
def outsider(globex):
    """A user of another tenant with every role there: must see nothing of acme."""
    return make_user("outsider", tenant=globex, roles=[Role.ADMIN, Role.APPROVER, Role.VIEWER])


@pytest.fixture
def platform_admin(db):
    return make_user("root", superuser=True)


@pytest.fixture
def agent_and_key(acme):
    return create_agent(tenant=acme, name="support-bot", role="support")


@pytest.fixture
def agent(agent_and_key):
    return agent_and_key[0]


@pytest.fixture
def agent_client(agent_and_key) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_and_key[1]}")
    return client


@pytest.fixture
def outsider_agent_client(globex) -> APIClient:
    _, key = create_agent(tenant=globex, name="globex-bot", role="support")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def login(client, user):
    client.force_login(user)
    return client
