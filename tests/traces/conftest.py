"""Factories for traces tests: runs, skills owned by a team, spans."""

import pytest
from django.utils import timezone

from registry.models import Skill, Snapshot
from runs.models import Run


@pytest.fixture
def snapshot(db) -> Snapshot:
    return Snapshot.objects.create(
        number=1, body={}, canonical_sha256="0" * 64, signature="x", key_id="k", reason="test"
    )


def make_run(*, tenant, agent, snapshot, end_user="alice@example.com", task="refund order 42") -> Run:
    return Run.objects.create(
        tenant=tenant, agent=agent, end_user=end_user, task=task, snapshot=snapshot, created_at=timezone.now()
    )


@pytest.fixture
def run(acme, agent, snapshot) -> Run:
    return make_run(tenant=acme, agent=agent, snapshot=snapshot)


@pytest.fixture
def owned_skill(owner_team) -> Skill:
    return Skill.objects.create(
        skill_id="skl_refund", name="billing.create_refund", namespace="billing", owner_team=owner_team
    )
