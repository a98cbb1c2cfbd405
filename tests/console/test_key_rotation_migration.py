"""The migration that adds rotation keeps every existing agent key working, unchanged, with its issue date."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from console.models import Agent, hash_key

BEFORE = [("console", "0004_gategeneration")]


def _latest() -> list:
    """Every app's last migration: through 0005_agent_key_rotation and the ones after it, since the test then
    reads with today's models."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_a_key_issued_before_rotation_existed_still_works_after_the_migration():
    executor = _migrate(BEFORE)
    old_apps = executor.loader.project_state(BEFORE).apps
    tenant = old_apps.get_model("console", "Tenant").objects.create(slug="acme", name="Acme")
    key = "ak_0123456789ab_" + "s" * 43
    created = timezone.now() - timedelta(days=400)
    old_apps.get_model("console", "Agent").objects.create(
        tenant=tenant, name="bot", role="support", key_lookup="0123456789ab", key_hash=hash_key(key), created_at=created
    )
    try:
        _migrate(_latest())
        agent = Agent.objects.get(name="bot")
        assert agent.key_created_at == created and agent.previous_key_lookup is None
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        assert client.get(reverse("agent-whoami")).json()["key"] == {
            "lookup": "0123456789ab",
            "replaced": False,
            "expires_at": None,
        }
    finally:
        _migrate(_latest())
