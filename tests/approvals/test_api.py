import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from approvals.models import ApprovalStatus
from console.services import create_personal_token, revoke_personal_token
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(acme, agent):
    return open_request(tenant=acme, agent=agent)


def _pat_client(user) -> tuple[APIClient, object]:
    token, key = create_personal_token(user=user, name="chat bot")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client, token


def test_list_pending_with_a_personal_token(approver, outsider, pending, globex, agent):
    client, _ = _pat_client(approver)
    response = client.get(reverse("approvals_api:approval_list"), {"status": "pending", "tenant": "acme"})
    assert response.status_code == 200
    [item] = response.json()["results"]
    assert item["id"] == pending.pk and item["proposed_action"]["arguments"]["card_token"] == "••••••"
    outsider_client, _ = _pat_client(outsider)
    assert outsider_client.get(reverse("approvals_api:approval_list")).json()["results"] == []
    assert outsider_client.get(reverse("approvals_api:approval_detail", args=[pending.pk])).status_code == 404


def test_decide_over_the_api_then_409_already_decided(approver, second_approver, pending, executions):
    client, _ = _pat_client(approver)
    url = reverse("approvals_api:approval_decision", args=[pending.pk])
    response = client.post(url, {"decision": "approve"}, format="json")
    assert response.status_code == 200 and response.json()["decided_by"] == "approver"
    assert response.json()["decided_via"] == "api"
    other, _ = _pat_client(second_approver)
    response = other.post(url, {"decision": "decline", "reason": "no"}, format="json")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["class"] == "conflict" and error["code"] == "already_decided"
    assert error["message"].startswith("already approved by approver at ")


def test_api_applies_the_same_rules(approver, viewer, outsider, pending, acme, agent, executions):
    client, _ = _pat_client(approver)
    url = reverse("approvals_api:approval_decision", args=[pending.pk])
    response = client.post(url, {"decision": "decline"}, format="json")
    assert response.status_code == 400 and response.json()["error"]["class"] == "validation"
    response = client.post(
        url, {"decision": "approve", "arguments": {"customer_id": "c-42", "amount_cents": -5}}, format="json"
    )
    assert response.status_code == 400 and response.json()["error"]["fields"][0]["path"] == "/amount_cents"
    viewer_client, _ = _pat_client(viewer)
    assert viewer_client.post(url, {"decision": "approve"}, format="json").status_code == 403
    outsider_client, _ = _pat_client(outsider)
    assert outsider_client.post(url, {"decision": "approve"}, format="json").status_code == 404
    assert client.get(url).status_code == 405
    own = open_request(tenant=acme, agent=agent, end_user="approver")
    response = client.post(
        reverse("approvals_api:approval_decision", args=[own.pk]), {"decision": "approve"}, format="json"
    )
    assert response.status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_revoked_token_and_agent_keys_are_refused(approver, pending, agent_client):
    client, token = _pat_client(approver)
    revoke_personal_token(token=token)
    assert client.get(reverse("approvals_api:approval_list")).status_code == 401
    assert agent_client.get(reverse("approvals_api:approval_list")).status_code == 403


def test_session_api_requires_csrf(approver, pending):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(approver)
    assert client.get(reverse("approvals_api:approval_list")).status_code == 200
    response = client.post(
        reverse("approvals_api:approval_decision", args=[pending.pk]), {"decision": "approve"}, format="json"
    )
    assert response.status_code == 403


def test_list_query_count_does_not_grow(approver, acme, agent, django_assert_max_num_queries):
    client, _ = _pat_client(approver)
    for _ in range(2):
        open_request(tenant=acme, agent=agent)
    with django_assert_max_num_queries(15) as few:
        client.get(reverse("approvals_api:approval_list"))
    for _ in range(8):
        open_request(tenant=acme, agent=agent)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(client.get(reverse("approvals_api:approval_list")).json()["results"]) == 10


def _token_answer_headers(response) -> None:
    """A token-authenticated answer: the security headers, and no cookie (no session, no CSRF token)."""
    assert response["X-Content-Type-Options"] == "nosniff" and response["X-Frame-Options"] == "DENY"
    assert "Set-Cookie" not in response and not response.cookies


def test_personal_token_requests_follow_the_same_rules(approver, outsider, viewer, pending):
    client, _ = _pat_client(approver)
    outsider_client, _ = _pat_client(outsider)
    viewer_client, _ = _pat_client(viewer)
    detail = reverse("approvals_api:approval_detail", args=[pending.pk])
    decision = reverse("approvals_api:approval_decision", args=[pending.pk])
    missing = reverse("approvals_api:approval_decision", args=[pending.pk + 1000])
    listed = outsider_client.get(reverse("approvals_api:approval_list"))
    assert listed.status_code == 200 and listed.json()["results"] == []
    theirs, nothing = (
        outsider_client.post(decision, {"decision": "approve"}, format="json"),
        outsider_client.post(missing, {"decision": "approve"}, format="json"),
    )
    assert theirs.status_code == nothing.status_code == 404 and theirs.json() == nothing.json()
    assert outsider_client.get(detail).status_code == 404
    assert viewer_client.post(decision, {"decision": "approve"}, format="json").status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING
    for response in (listed, theirs, client.get(detail)):
        _token_answer_headers(response)


def test_a_session_cookie_does_not_rescue_a_forged_token(approver, pending):
    attacker = APIClient()
    attacker.force_login(approver)  # a real approver's session, riding along with a made-up token
    attacker.credentials(HTTP_AUTHORIZATION="Bearer pat_notatoken_" + "x" * 43)
    response = attacker.post(
        reverse("approvals_api:approval_decision", args=[pending.pk]), {"decision": "approve"}, format="json"
    )
    assert response.status_code == 401
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_an_agent_key_cannot_decide(agent_client, pending):
    response = agent_client.post(
        reverse("approvals_api:approval_decision", args=[pending.pk]), {"decision": "approve"}, format="json"
    )
    assert response.status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_the_list_reads_each_skill_version_once_not_once_per_request(approver, acme, agent):
    client, _ = _pat_client(approver)
    for _ in range(5):
        open_request(tenant=acme, agent=agent)
    with CaptureQueriesContext(connection) as queries:
        results = client.get(reverse("approvals_api:approval_list")).json()["results"]
    assert len(results) == 5 and all(r["proposed_action"]["downstream"] for r in results)
    version_reads = [q["sql"] for q in queries.captured_queries if 'FROM "registry_skillversion"' in q["sql"]]
    assert len(version_reads) == 1, version_reads


TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def _statements(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(TRANSACTION_CONTROL)]


def test_a_decision_and_the_resume_it_starts_stay_within_their_statement_budget(approver, pending, executions):
    """The decision reads the request, its votes and the approver's role once, then writes the decision,
    its audit row, the agent's event and a span; the resume claims, checks live in one query, executes
    and records. Reading the request (and with it the call, run and tenant) again after each UPDATE is
    what this guards against."""
    from approvals.services import resume_approval

    client, _ = _pat_client(approver)
    client.get(reverse("approvals_api:approval_list"))  # the token's first use records last_used_at
    with CaptureQueriesContext(connection) as decision:
        response = client.post(
            reverse("approvals_api:approval_decision", args=[pending.pk]), {"decision": "approve"}, format="json"
        )
    assert response.status_code == 200 and response.json()["status"] == ApprovalStatus.APPROVED
    with CaptureQueriesContext(connection) as resume:
        resumed = resume_approval(approval_id=pending.pk)  # the task's work (Celery sends it after the commit)
    assert resumed.status == ApprovalStatus.EXECUTED and len(executions) == 1
    # 12, and the audit row's link in its tenant's hash chain: read the head, insert (and lock, on PostgreSQL)
    assert len(_statements(decision)) <= 15, "\n".join(_statements(decision))  # 16 before
    # 33 before; three of the 27 fill the gate caches this test's fresh grants left empty (warm: 24)
    # and two audit rows, each linked in its tenant's chain as above (27 before the chain)
    assert len(_statements(resume)) <= 33, "\n".join(_statements(resume))
