"""An attacker holding a leaked personal access token: an old one, or one made only for reading."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalStatus
from console.models import PersonalAccessToken
from console.services import create_personal_token
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def pending(acme, agent):
    return open_request(tenant=acme, agent=agent)


def test_an_expired_token_gets_401_expired_token(approver, pending):
    token, key = create_personal_token(user=approver, name="old bot", expires_in=timedelta(days=1))
    api = _client(key)
    assert api.get(reverse("approvals_api:approval_list")).status_code == 200
    PersonalAccessToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for response in (
        api.get(reverse("approvals_api:approval_list")),
        api.post(reverse("approvals_api:approval_decision", args=[pending.pk]), {"decision": "approve"}, format="json"),
    ):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "expired_token"
        assert "expired" in response.json()["error"]["message"]
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_a_read_only_token_reads_but_cannot_decide(approver, pending):
    _, key = create_personal_token(user=approver, name="dashboard", scopes=["read"])
    api = _client(key)
    assert api.get(reverse("approvals_api:approval_detail", args=[pending.pk])).status_code == 200
    refused = api.post(
        reverse("approvals_api:approval_decision", args=[pending.pk]), {"decision": "approve"}, format="json"
    )
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "insufficient_scope" and error["required_scope"] == "approve"
    assert "'approve' scope" in error["message"]
    declined = api.post(
        reverse("approvals_api:approval_decision", args=[pending.pk]),
        {"decision": "decline", "reason": "no"},
        format="json",
    )
    assert declined.status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_a_decide_only_token_cannot_read(approver, pending):
    _, key = create_personal_token(user=approver, name="decider", scopes=["approve"])
    refused = _client(key).get(reverse("approvals_api:approval_list"))
    assert refused.status_code == 403 and refused.json()["error"]["required_scope"] == "read"


def test_a_read_only_token_changes_nothing_else_either(tenant_admin):
    _, key = create_personal_token(user=tenant_admin, name="audit", scopes=["read"])
    api = _client(key)
    assert api.get(reverse("policies_api:tenant_grants", args=["acme"])).status_code == 200
    refused = api.post(
        reverse("policies_api:tenant_grants", args=["acme"]),
        {"skill_pattern": "orders.*", "agent_role": "support"},
        format="json",
    )
    assert refused.status_code == 403 and refused.json()["error"]["required_scope"] == "approve"


def test_a_token_with_both_scopes_decides(approver, pending, settings):
    _, key = create_personal_token(user=approver, name="bot", scopes=["read", "approve"])
    declined = _client(key).post(
        reverse("approvals_api:approval_decision", args=[pending.pk]),
        {"decision": "decline", "reason": "not today"},
        format="json",
    )
    assert declined.status_code == 200 and declined.json()["status"] == "declined"
