import pytest
from django.urls import reverse

from approvals.models import ApprovalStatus
from approvals.presentation import shown_arguments
from tests.approvals.factories import make_run, open_request
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(acme, agent):
    return open_request(tenant=acme, agent=agent)


def test_inbox_lists_pending_cards_with_masked_args_and_countdown(client, approver, pending):
    response = login(client, approver).get(reverse("approvals:inbox"))
    body = response.content.decode()
    assert response.status_code == 200
    assert f'id="approval-{pending.pk}"' in body
    assert "tok_live_secret" not in body and "••••••" in body
    assert "Refunds over 10 EUR need a person" in body and "read inbound email" in body
    assert "data-expires-at=" in body
    assert 'id="pending-count" data-count="1"' in body  # the nav badge on every page


def test_inbox_is_newest_first_and_filters(client, approver, acme, agent):
    older = open_request(tenant=acme, agent=agent)
    newer = open_request(tenant=acme, agent=agent)
    body = login(client, approver).get(reverse("approvals:inbox")).content.decode()
    assert body.index(f"approval-{newer.pk}") < body.index(f"approval-{older.pk}")
    body = client.get(reverse("approvals:inbox"), {"effect": "destructive"}).content.decode()
    assert f'id="approval-{newer.pk}"' not in body
    body = client.get(
        reverse("approvals:inbox"), {"skill": "refund", "agent": "support-bot", "tenant": "acme"}
    ).content.decode()
    assert f'id="approval-{newer.pk}"' in body


def test_outsider_and_viewer_see_no_cards(client, outsider, viewer, pending):
    for person in (outsider, viewer):
        client.force_login(person)
        body = client.get(reverse("approvals:inbox")).content.decode()
        assert f"approval-{pending.pk}" not in body
    # The viewer approves nowhere: one panel that says so, not that and an empty one below it.
    client.force_login(viewer)
    body = client.get(reverse("approvals:inbox")).content.decode()
    assert body.count("You are not an approver in any tenant.") == 1 and body.count('class="panel empty"') == 1
    client.force_login(outsider)
    assert client.get(reverse("approvals:detail", args=[pending.pk])).status_code == 404
    assert client.get(reverse("approvals:card", args=[pending.pk])).status_code == 404


def test_card_partial_is_empty_once_decided(client, approver, second_approver, pending, executions):
    login(client, second_approver)
    url = reverse("approvals:card", args=[pending.pk])
    assert f"approval-{pending.pk}" in client.get(url).content.decode()
    client.force_login(approver)
    client.post(reverse("approvals:decide", args=[pending.pk]), {"decision": "approve"})
    client.force_login(second_approver)
    response = client.get(url)
    assert response.status_code == 200 and response.content == b""


def test_decide_happy_path_redirects_and_approves(client, approver, pending, executions):
    response = login(client, approver).post(reverse("approvals:decide", args=[pending.pk]), {"decision": "approve"})
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.status != ApprovalStatus.PENDING and pending.decided_by == approver


def test_decide_via_htmx_returns_the_decided_note(client, approver, pending, executions):
    response = login(client, approver).post(
        reverse("approvals:decide", args=[pending.pk]),
        {"decision": "decline", "reason": "nope"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and "declined by approver" in response.content.decode()


def test_double_click_says_already_decided(client, approver, pending, executions):
    login(client, approver)
    url = reverse("approvals:decide", args=[pending.pk])
    client.post(url, {"decision": "approve"})
    response = client.post(url, {"decision": "approve"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 409
    assert "already" in response.content.decode() and "by approver at" in response.content.decode()


def test_decline_without_reason_is_refused(client, approver, pending):
    response = login(client, approver).post(
        reverse("approvals:decide", args=[pending.pk]), {"decision": "decline", "reason": ""}
    )
    assert response.status_code == 400 and "reason" in response.content.decode()
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_decide_wrong_method_outsider_and_viewer(client, approver, viewer, outsider, pending):
    url = reverse("approvals:decide", args=[pending.pk])
    assert login(client, approver).get(url).status_code == 405
    client.force_login(outsider)
    assert client.post(url, {"decision": "approve"}).status_code == 404
    client.force_login(viewer)
    assert client.post(url, {"decision": "approve"}).status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_decide_requires_csrf(approver, pending):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    assert client.post(reverse("approvals:decide", args=[pending.pk]), {"decision": "approve"}).status_code == 403


def test_own_run_cannot_be_approved_in_the_console(client, approver, acme, agent):
    request = open_request(tenant=acme, agent=agent, end_user="approver")
    response = login(client, approver).post(reverse("approvals:decide", args=[request.pk]), {"decision": "approve"})
    assert response.status_code == 403


def test_detail_shows_audit_trail_with_edit_diff(client, approver, pending, executions):
    login(client, approver)
    edited = {**shown_arguments(pending, approver), "amount_cents": 300}
    import json

    client.post(
        reverse("approvals:decide", args=[pending.pk]), {"decision": "approve", "arguments": json.dumps(edited)}
    )
    body = client.get(reverse("approvals:detail", args=[pending.pk])).content.decode()
    assert "Audit trail" in body and "replace /amount_cents: 1250 → 300" in body
    assert "tok_live_secret" not in body


def test_history_lists_my_decisions_only(client, approver, second_approver, acme, agent, executions):
    mine = open_request(tenant=acme, agent=agent)
    theirs = open_request(tenant=acme, agent=agent)
    login(client, approver).post(reverse("approvals:decide", args=[mine.pk]), {"decision": "approve"})
    client.force_login(second_approver)
    client.post(reverse("approvals:decide", args=[theirs.pk]), {"decision": "decline", "reason": "no"})
    client.force_login(approver)
    body = client.get(reverse("approvals:history")).content.decode()
    assert f"#{mine.pk}<" in body and f"#{theirs.pk}<" not in body


def test_count_and_dashboard_card(client, approver, acme, agent):
    run = make_run(tenant=acme, agent=agent)
    open_request(tenant=acme, agent=agent, run=run, call_id="x")
    open_request(tenant=acme, agent=agent, run=run, call_id="y")
    login(client, approver)
    assert client.get(reverse("approvals:count")).content == b"2"
    body = client.get(reverse("console:home")).content.decode()
    assert "Pending approvals" in body and "acme: 2" in body and "oldest waiting" in body


def test_inbox_query_count_does_not_grow_with_cards(client, approver, acme, agent, django_assert_max_num_queries):
    for _ in range(3):
        open_request(tenant=acme, agent=agent)
    login(client, approver)
    client.get(reverse("approvals:inbox"))
    with django_assert_max_num_queries(20) as few:
        client.get(reverse("approvals:inbox"))
    for _ in range(10):
        open_request(tenant=acme, agent=agent)
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get(reverse("approvals:inbox"))
