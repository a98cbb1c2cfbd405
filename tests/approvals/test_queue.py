"""The inbox as a queue: like requests grouped, decided in bulk one by one, each card's history, the compact
list remembered per person, and the small corrections of the Approvals tab (non-approvers, auditors)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals import queue, routing_rules
from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval
from console.models import UserPreference
from console.services import create_agent
from tests.approvals.factories import open_request
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_refunds(acme, agent):
    """Three like requests: one agent, one skill, one reason."""
    return [open_request(tenant=acme, agent=agent, end_user="cus_ada100") for _ in range(3)]


def _bulk(client, ids, decision="approve", reason="", **extra):
    data = {"ids": [str(pk) for pk in ids], "decision": decision, "reason": reason}
    return client.post(reverse("approvals:bulk_decide"), data, **extra)


def test_like_requests_are_grouped_with_a_count_and_open_to_their_members(client, approver, three_refunds, acme):
    other_agent, _ = create_agent(tenant=acme, name="ops-bot", role="support")
    lone = open_request(tenant=acme, agent=other_agent)
    body = login(client, approver).get(reverse("approvals:inbox")).content.decode()
    newest = three_refunds[-1]
    group = body[body.index(f'id="group-{newest.pk}"') :]
    group = group[: group.index("</section>")]
    assert 'data-group-size="3"' in group and "Approve all 3" in group and "Show the 3 requests" in group
    for approval in three_refunds:
        assert f'id="approval-{approval.pk}"' in group and f'name="ids" value="{approval.pk}"' in group
    assert f'id="approval-{lone.pk}"' in body and f'id="approval-{lone.pk}"' not in group
    assert "<title>(4) Approvals · Airlock</title>" in body  # the tab carries the pending count


def test_a_group_is_decided_at_once_each_request_on_its_own_record(client, approver, three_refunds, executions):
    response = _bulk(login(client, approver), [a.pk for a in three_refunds], "decline", "Duplicate requests.")
    assert response.status_code == 302
    for approval in three_refunds:
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.DECLINED and approval.decline_reason == "Duplicate requests."
        events = ApprovalEvent.objects.filter(request=approval, action="declined")
        assert events.count() == 1 and events.get().actor == approver
    assert executions == []


def test_a_bulk_decision_says_what_became_of_each_request_over_htmx(client, approver, three_refunds, executions):
    ids = [a.pk for a in three_refunds]
    response = _bulk(login(client, approver), ids, "approve", "", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and body.count('class="done"') == 3
    assert all(f'data-outcome="{pk}"' in body for pk in ids)
    assert ApprovalRequest.objects.filter(pk__in=ids, status=ApprovalStatus.PENDING).count() == 0


def test_a_decline_without_a_reason_decides_nothing(client, approver, three_refunds):
    response = _bulk(login(client, approver), [a.pk for a in three_refunds], "decline", "", HTTP_HX_REQUEST="true")
    assert response.content.decode().count('class="refused"') == 3
    assert ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).count() == 3


def test_attacker_ids_of_another_tenant_or_not_routed_to_you_decide_nothing_of_those(
    client, approver, second_approver, acme, globex, agent, three_refunds
):
    globex_agent, _ = create_agent(tenant=globex, name="globex-bot", role="support")
    foreign = open_request(tenant=globex, agent=globex_agent)
    group = routing_rules.create_group(tenant=acme, name="billing", actor="test")
    routing_rules.add_group_member(group=group, user=second_approver, actor="test")
    routing_rules.save_route(
        tenant=acme, name="refunds", condition='skill.namespace == "billing"', group=group, actor="test"
    )
    elsewhere = open_request(tenant=acme, agent=agent)
    assert elsewhere.group == group
    mine = three_refunds[0]

    ids = [foreign.pk, elsewhere.pk, mine.pk, 987654321]
    outcomes = {
        o.approval_id: o
        for o in queue.decide_approvals(approval_ids=ids, user=approver, decision="decline", reason="no")
    }
    assert outcomes[foreign.pk].ok is False and "not found" in outcomes[foreign.pk].message
    assert outcomes[987654321].ok is False and "not found" in outcomes[987654321].message
    assert outcomes[elsewhere.pk].ok is False and "approver group billing" in outcomes[elsewhere.pk].message
    assert outcomes[mine.pk].ok is True
    foreign.refresh_from_db()
    elsewhere.refresh_from_db()
    assert foreign.status == elsewhere.status == ApprovalStatus.PENDING
    assert not ApprovalEvent.objects.filter(request__in=[foreign, elsewhere], action="declined").exists()

    # The page says so without naming the other tenant's request.
    body = _bulk(login(client, approver), [foreign.pk], "decline", "no", HTTP_HX_REQUEST="true").content.decode()
    assert "not found: nothing was decided" in body and foreign.skill_name not in body


def test_self_approval_inside_a_bulk_is_refused_for_that_item_only(client, approver, acme, agent, executions):
    others = [open_request(tenant=acme, agent=agent, end_user="cus_ada100") for _ in range(2)]
    own = open_request(tenant=acme, agent=agent, end_user="approver")  # this run acts for the approver
    ids = [own.pk, *[a.pk for a in others]]
    body = _bulk(login(client, approver), ids, "approve", "", HTTP_HX_REQUEST="true").content.decode()
    assert "You cannot approve a run that acts on your own behalf" in body
    own.refresh_from_db()
    assert own.status == ApprovalStatus.PENDING
    for approval in others:
        approval.refresh_from_db()
        assert approval.status != ApprovalStatus.PENDING and approval.decided_by == approver


def test_bulk_wrong_method_viewer_and_outsider(client, viewer, outsider, three_refunds):
    login(client, viewer)
    assert client.get(reverse("approvals:bulk_decide")).status_code == 405
    assert _bulk(client, [three_refunds[0].pk]).status_code == 403  # approves nowhere
    body = _bulk(login(client, outsider), [three_refunds[0].pk], HTTP_HX_REQUEST="true").content.decode()
    assert "not found" in body
    assert ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).count() == 3


def test_each_card_carries_its_end_users_and_agents_history(client, approver, acme, agent, three_refunds, executions):
    decide_approval(approval=three_refunds[0], user=approver, decision="decline", reason="duplicate")
    body = login(client, approver).get(reverse("approvals:inbox")).content.decode()
    assert (
        "<strong>3rd</strong> billing.create_refund for <strong>cus_ada100</strong> this week (2 pending, 1 declined)"
        in body
    )
    assert "support-bot, last 30 days: 1 decided, <strong>100% declined</strong>" in body


def test_the_inbox_reads_every_cards_history_in_one_query(client, approver, acme, agent):
    login(client, approver)
    open_request(tenant=acme, agent=agent, end_user="cus_a")
    client.get(reverse("approvals:inbox"))  # warm the session and the content types
    with CaptureQueriesContext(connection) as one:
        client.get(reverse("approvals:inbox"))
    other_agent, _ = create_agent(tenant=acme, name="ops-bot", role="support")
    for n in range(4):
        open_request(tenant=acme, agent=other_agent if n % 2 else agent, end_user=f"cus_{n}")
    with CaptureQueriesContext(connection) as five:
        body = client.get(reverse("approvals:inbox")).content.decode()
    assert body.count('class="history small"') == 5
    assert len(five) == len(one), [q["sql"] for q in five.captured_queries]
    assert sum("context" in q["sql"] and "GROUP BY" in q["sql"] for q in five.captured_queries) == 1


def test_the_compact_list_is_remembered_for_the_person(client, approver, three_refunds):
    login(client, approver)
    assert 'id="pending-list" class=""' in client.get(reverse("approvals:inbox")).content.decode()
    assert client.get(reverse("approvals:inbox_layout")).status_code == 405
    response = client.post(reverse("approvals:inbox_layout"), {"compact": "1"})
    assert response.status_code == 302 and UserPreference.objects.get(user=approver).compact_inbox
    other_browser = login(type(client)(), approver)
    body = other_browser.get(reverse("approvals:inbox")).content.decode()
    assert 'id="pending-list" class="compact"' in body and "Full cards" in body
    client.post(reverse("approvals:inbox_layout"), {"compact": "0"})
    assert not UserPreference.objects.get(user=approver).compact_inbox


def test_a_non_approver_gets_a_plain_explanation_and_no_filters(client, viewer, three_refunds):
    body = login(client, viewer).get(reverse("approvals:inbox")).content.decode()
    assert "You are not an approver in any tenant." in body
    assert 'class="filters"' not in body and 'id="bulk-form"' not in body and "Recently decided" not in body


def test_the_auditors_recently_decided_agrees_with_her_decisions_page(client, approver, auditor, three_refunds, acme):
    decide_approval(approval=three_refunds[0], user=approver, decision="decline", reason="duplicate")
    login(client, auditor)
    decisions = client.get(reverse("approvals:decision_history", args=[acme.slug])).content.decode()
    assert "duplicate" in decisions
    body = client.get(reverse("approvals:inbox")).content.decode()
    assert (
        "No decisions yet." not in body and f'href="{reverse("approvals:detail", args=[three_refunds[0].pk])}"' in body
    )
    assert 'class="filters"' not in body and "You are not an approver in any tenant." in body
