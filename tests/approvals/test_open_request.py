from datetime import timedelta

import pytest

from approvals.masking import MASK
from approvals.models import ApprovalEvent, ApprovalStatus
from approvals.presentation import shown_arguments
from lib.canonical import sha256_of
from runs.models import RunEvent
from tests.approvals.factories import DEFAULT_ARGUMENTS, make_skill_version, open_request

pytestmark = pytest.mark.django_db


def test_open_binds_request_to_arguments_hash_policy_and_context(acme, agent, approver):
    request = open_request(tenant=acme, agent=agent)
    assert request.status == ApprovalStatus.PENDING
    assert request.arguments_sha256 == sha256_of(DEFAULT_ARGUMENTS)
    assert request.policy_version == "7" and request.rule_id == "refund-needs-human"
    assert request.taint_source == "read inbound email"
    assert request.context["agent"] == "support-bot" and request.context["end_user"] == "customer-7"
    assert request.action["skill"] == "billing.create_refund" and request.action["effect"] == "external"
    assert request.action["arguments"]["card_token"]["redacted"] is True  # at rest: never the token itself
    assert shown_arguments(request, approver)["card_token"] == MASK  # the approver sees it masked
    assert request.expires_at - request.created_at == acme.approval_ttl
    event = ApprovalEvent.objects.get(request=request)
    assert (event.action, event.to_status, event.actor_label) == ("requested", "pending", "agent:support-bot")
    feed = RunEvent.objects.get(run=request.call.run)
    assert feed.kind == "approval.requested" and feed.payload["approval_id"] == request.pk


def test_open_is_idempotent_per_call(acme, agent):
    from approvals.services import open_approval_request

    request = open_request(tenant=acme, agent=agent)
    again = open_approval_request(call=request.call, decision={})
    assert again.pk == request.pk


def test_skill_ttl_overrides_tenant_ttl_and_two_person_mode(acme, agent):
    version = make_skill_version(name="iam.revoke_access", approval="two_person", ttl_seconds=120)
    request = open_request(tenant=acme, agent=agent, skill_version=version)
    assert request.expires_at - request.created_at == timedelta(seconds=120)
    assert request.required_approvals == 2


def test_audit_log_is_append_only(acme, agent):
    request = open_request(tenant=acme, agent=agent)
    event = request.events.get()
    event.action = "tampered"
    with pytest.raises(ValueError):
        event.save()
    with pytest.raises(ValueError):
        event.delete()
