"""Owners are told through one Celery task, never by SMTP inside the caller's request."""

import ast
from pathlib import Path

import pytest
from django.core import mail

from registry.notifications import email_owners, notify_owners
from tests.runs.factories import make_skill

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_notify_queues_the_task_and_the_task_mails_the_owning_team(owner_team, monkeypatch):
    owner_team.email = "owners@example.org"
    owner_team.save()
    make_skill("billing.refund", team=owner_team)
    queued = []
    monkeypatch.setattr(email_owners, "delay", lambda **kwargs: queued.append(kwargs))  # the broker: the edge
    assert notify_owners(skill_name="billing.refund", subject="breaker opened", body="5 failures")
    assert mail.outbox == []  # nothing sent inside the caller
    assert queued == [{"skill_name": "billing.refund", "subject": "breaker opened", "body": "5 failures"}]
    assert email_owners.run(**queued[0])
    assert [m.to for m in mail.outbox] == [[owner_team.email]] and mail.outbox[0].subject == "[Airlock] breaker opened"


def test_the_same_dedupe_key_is_queued_once(owner_team, monkeypatch):
    owner_team.email = "owners@example.org"
    owner_team.save()
    make_skill("billing.refund", team=owner_team)
    queued = []
    monkeypatch.setattr(email_owners, "delay", lambda **kwargs: queued.append(kwargs))
    results = [
        notify_owners(skill_name="billing.refund", subject="s", body="b", dedupe_key="contract:x") for _ in range(3)
    ]
    assert results == [True, False, False] and len(queued) == 1


def test_only_registry_notifications_and_console_invitations_send_mail():
    """Owner mail has one path; the other senders mail people, not owners (invitations, escalations)."""
    senders = set()
    for path in ROOT.glob("*/**/*.py"):
        if any(part in {".venv", "tests", "migrations", "bench", "sdk"} for part in path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id == "send_mail":
                senders.add(str(path.relative_to(ROOT)))
    assert senders == {
        "registry/notifications.py",
        "console/services.py",
        "approvals/services.py",
        "approvals/notifications.py",  # approvers hear of new requests (people, not owners)
        "runs/tasks.py",  # a tenant's admins hear of a flagged call decided locally (owners hear through registry)
    }
