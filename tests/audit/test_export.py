"""The audit export (`format=audit`) carries what an outsider needs to check the chain without Airlock."""

import importlib.util
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from approvals.models import ApprovalEvent
from audit import chain
from lib import signing
from policies import services
from tests.conftest import login

pytestmark = pytest.mark.django_db

_spec = importlib.util.spec_from_file_location("verify_audit_export", settings.BASE_DIR / "docs/verify_audit_export.py")
standalone = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(standalone)


def _export(client, user) -> list[str]:
    login(client, user)
    response = client.get(reverse("approvals:decision_export", args=["acme"]) + "?format=audit")
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode().splitlines()


def test_the_standalone_checker_verifies_an_export_and_names_a_change(client, acme, tenant_admin, auditor):
    made = services.create_grant(tenant=acme, skill_pattern="docs.*", agent_role="support", granted_by=tenant_admin)
    services.revoke_grant(grant=made, revoked_by=tenant_admin, reason="bot retired")
    ApprovalEvent.objects.create(tenant=acme, actor_label="bob", action="approved", detail={"via": "console"})
    chain.write_checkpoints()
    lines = _export(client, auditor)
    kinds = [line.split('"type": "')[1].split('"')[0] for line in lines]
    assert kinds[0] == "key" and kinds.count("link") == 3 and "checkpoint" in kinds
    assert kinds.count("grant_event") == 2 and "bot retired" in lines[-1]
    assert standalone.check(lines, signing.public_key_pem()) == []

    tampered = [line.replace('"actor_label": "bob"', '"actor_label": "eve"') for line in lines]
    assert [problem for problem in standalone.check(tampered, None) if "does not match its hash" in problem]
    forged_key = [line for line in lines if '"type": "checkpoint"' not in line] + [
        line.replace('"signature": "', '"signature": "AAAA') for line in lines if '"type": "checkpoint"' in line
    ]
    assert any("bad signature" in problem for problem in standalone.check(forged_key, None))


def test_another_tenants_admin_and_a_viewer_cannot_export(client, acme, outsider, viewer):
    for user, status in ((outsider, 404), (viewer, 403)):
        login(client, user)
        url = reverse("approvals:decision_export", args=["acme"]) + "?format=audit"
        assert client.get(url).status_code == status


def test_the_standalone_checker_is_the_documented_one():
    assert "verify_audit_export.py" in Path(settings.BASE_DIR / "docs/security.md").read_text()
