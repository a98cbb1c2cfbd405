"""Approval routing, tried by the people it must keep out: an approver outside the routed group, a tenant
admin who is not in it, another tenant's admin, a viewer, a group member who was removed mid-vote."""

from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals import notices, routing_rules
from approvals.models import (
    ApprovalEvent,
    ApprovalNotice,
    ApprovalRequest,
    ApprovalRoute,
    ApprovalStatus,
    ApproverGroup,
)
from approvals.notifications import notify_new_request
from approvals.services import NotInRoutedGroup, decide_approval, escalate_overdue_approvals
from console.models import Role
from tests.approvals.factories import make_skill_version, open_request
from tests.conftest import login, make_user

pytestmark = pytest.mark.django_db

REFUNDS = 'skill.namespace == "billing"'


@pytest.fixture
def billing(acme, approver):
    """acme's billing approvers (`approver`) and the route that sends every billing call to them."""
    group = routing_rules.create_group(tenant=acme, name="billing", actor="test")
    routing_rules.add_group_member(group=group, user=approver, actor="test")
    routing_rules.save_route(tenant=acme, name="refunds", condition=REFUNDS, group=group, actor="test")
    return group


@pytest.fixture
def support_approver(acme):
    """An approver of acme who is not in the billing group."""
    return make_user("support-approver", tenant=acme, roles=[Role.APPROVER, Role.VIEWER])


@pytest.fixture
def overseer(acme):
    """acme's admin, also an approver, in no group."""
    return make_user("overseer", tenant=acme, roles=[Role.ADMIN, Role.APPROVER, Role.VIEWER])


def _refund(acme, agent) -> ApprovalRequest:
    return open_request(tenant=acme, agent=agent)


def _other_call(acme, agent) -> ApprovalRequest:
    return open_request(tenant=acme, agent=agent, skill_version=make_skill_version(name="iam.revoke_access"))


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _listed(user, **query) -> set[int]:
    response = _api(user).get(reverse("approvals_api:approval_list"), query)
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def _inbox_ids(user, **query) -> str:
    response = login(Client(), user).get(reverse("approvals:inbox"), query)
    assert response.status_code == 200
    return response.content.decode()


# --- choosing the group ----------------------------------------------------------------------------


def test_the_first_matching_route_wins_and_an_unmatched_call_goes_to_every_approver(acme, agent, billing, approver):
    big = routing_rules.create_group(tenant=acme, name="big refunds", actor="test")
    routing_rules.add_group_member(group=big, user=approver, actor="test")
    big_refunds = 'skill.namespace == "billing" && args.amount_cents > 1000'
    routing_rules.save_route(tenant=acme, name="big", condition=big_refunds, group=big, actor="test")

    refund = _refund(acme, agent)  # 1250 cents, billing: both routes match, the first (refunds) wins
    other = _other_call(acme, agent)

    assert (refund.group, refund.route_name) == (billing, "refunds")
    assert other.group is None and other.route_name == ""
    detail = ApprovalEvent.objects.get(request=refund, action="requested").detail
    assert detail["group"] == "billing" and detail["route"] == "refunds"


def test_moving_a_route_first_changes_where_the_next_request_goes(acme, agent, billing, approver):
    big = routing_rules.create_group(tenant=acme, name="big refunds", actor="test")
    route = routing_rules.save_route(
        tenant=acme, name="big", condition="args.amount_cents > 1000", group=big, actor="test"
    )
    routing_rules.move_route(route=route, to_position=0, actor="test")
    assert list(ApprovalRoute.objects.filter(tenant=acme).values_list("name", flat=True)) == ["big", "refunds"]
    assert _refund(acme, agent).group == big


def test_a_condition_that_cannot_be_evaluated_on_a_call_does_not_hide_it(acme, agent, billing, support_approver):
    """`args.missing` fails on this call: the route is skipped, the request goes on (here: to everyone)."""
    ApprovalRoute.objects.filter(name="refunds").update(condition="args.no_such_argument == 1")
    request = _refund(acme, agent)
    assert request.group is None
    assert request.pk in _listed(support_approver)


# --- who sees it ----------------------------------------------------------------------------------


def test_an_approver_outside_the_group_sees_it_nowhere(acme, agent, billing, approver, support_approver):
    refund, other = _refund(acme, agent), _other_call(acme, agent)

    assert _listed(approver) == {refund.pk, other.pk}
    assert _listed(support_approver) == {other.pk}
    assert _listed(support_approver, status="all") == {other.pk}
    assert f'id="approval-{refund.pk}"' in _inbox_ids(approver)
    assert f'id="approval-{refund.pk}"' not in _inbox_ids(support_approver)
    count = login(Client(), support_approver).get(reverse("approvals:count")).content
    assert count == b"1"
    card = login(Client(), support_approver).get(reverse("approvals:card", args=[refund.pk]))
    assert card.status_code == 200 and card.content == b""  # the live inbox's card: empty, as once decided


def test_an_admin_lists_every_request_only_when_asking_for_all(acme, agent, billing, overseer):
    refund = _refund(acme, agent)
    assert refund.pk not in _listed(overseer)
    assert refund.pk in _listed(overseer, group="all")
    assert f'id="approval-{refund.pk}"' not in _inbox_ids(overseer)
    everything = _inbox_ids(overseer, group="all")
    assert f'id="approval-{refund.pk}"' in everything
    assert "data-not-routed" in everything and "only its members decide it" in everything  # no buttons to fail


def test_all_lists_nothing_more_for_an_approver_who_is_not_admin(acme, agent, billing, support_approver):
    refund = _refund(acme, agent)
    assert refund.pk not in _listed(support_approver, group="all")
    assert f'id="approval-{refund.pk}"' not in _inbox_ids(support_approver, group="all")


def test_an_unknown_group_filter_is_a_400_naming_it(support_approver):
    response = _api(support_approver).get(reverse("approvals_api:approval_list"), {"group": "billing"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_group"


# --- who decides it -------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["support_approver", "overseer"])
def test_nobody_outside_the_group_decides_it(who, request, acme, agent, billing, executions):
    user = request.getfixturevalue(who)
    refund = _refund(acme, agent)

    api = _api(user).post(
        reverse("approvals_api:approval_decision", args=[refund.pk]), {"decision": "approve"}, format="json"
    )
    assert api.status_code == 403 and api.json()["error"]["code"] == "not_in_routed_group"
    assert "billing" in api.json()["error"]["message"]
    console = login(Client(), user).post(reverse("approvals:decide", args=[refund.pk]), {"decision": "approve"})
    assert console.status_code == 403
    declined = login(Client(), user).post(
        reverse("approvals:decide", args=[refund.pk]), {"decision": "decline", "reason": "no"}
    )
    assert declined.status_code == 403

    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.PENDING and not refund.votes.exists()
    assert list(refund.events.values_list("action", flat=True)) == ["requested"]
    assert executions == []


def test_a_member_of_the_group_decides_it(acme, agent, billing, approver, django_capture_on_commit_callbacks):
    refund = _refund(acme, agent)
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=refund, user=approver, decision="approve")
    refund.refresh_from_db()
    assert refund.status in (ApprovalStatus.EXECUTED, ApprovalStatus.APPROVED)


def test_losing_the_approver_role_ends_a_members_access(acme, agent, billing, approver):
    refund = _refund(acme, agent)
    approver.memberships.filter(role=Role.APPROVER).delete()
    assert refund.pk not in _listed(approver)
    assert not refund.routed_to_user(approver)


def test_two_person_counts_only_the_groups_members(acme, agent, billing, approver, second_approver):
    third = make_user("approver3", tenant=acme, roles=[Role.APPROVER])
    for user in (second_approver, third):
        routing_rules.add_group_member(group=billing, user=user, actor="test")
    request = open_request(
        tenant=acme, agent=agent, skill_version=make_skill_version(name="billing.wipe_ledger", approval="two_person")
    )
    assert request.group == billing and request.required_approvals == 2

    decide_approval(approval=request, user=approver, decision="approve")
    routing_rules.remove_group_member(group=billing, user=approver, actor="test")  # their vote stops counting
    decide_approval(approval=request, user=second_approver, decision="approve")
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING, "a vote of someone no longer in the group counted"

    decide_approval(approval=request, user=third, decision="approve")
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    assert request.events.get(action="approved").detail["approvers"] == ["approver2", "approver3"]


def test_a_non_member_cannot_cast_the_second_vote(acme, agent, billing, approver, support_approver):
    request = open_request(
        tenant=acme, agent=agent, skill_version=make_skill_version(name="billing.wipe_ledger", approval="two_person")
    )
    decide_approval(approval=request, user=approver, decision="approve")
    with pytest.raises(NotInRoutedGroup):
        decide_approval(approval=request, user=support_approver, decision="approve")
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and request.votes.count() == 1


# --- who is told ----------------------------------------------------------------------------------


def test_only_the_groups_members_are_mailed(acme, agent, billing, approver, support_approver, overseer):
    refund = _refund(acme, agent)
    notify_new_request(approval_id=refund.pk)
    assert set(ApprovalNotice.objects.filter(approval=refund).values_list("user__username", flat=True)) == {
        approver.username
    }
    assert "Decided by: the billing group" in notices.mail_of(notices.notice_of(refund))[1]
    assert "*Decided by:* the billing group" in notices.slack_body(notices.notice_of(refund))
    other = _other_call(acme, agent)
    notify_new_request(approval_id=other.pk)
    told = set(ApprovalNotice.objects.filter(approval=other).values_list("user__username", flat=True))
    assert told == {approver.username, support_approver.username, overseer.username}


# --- escalation -----------------------------------------------------------------------------------


def test_an_overdue_request_escalates_to_the_fallback_group(
    acme, agent, billing, approver, django_capture_on_commit_callbacks
):
    lead = make_user("billing-lead", tenant=acme, roles=[Role.APPROVER])
    leads = routing_rules.create_group(tenant=acme, name="billing leads", actor="test")
    routing_rules.add_group_member(group=leads, user=lead, actor="test")
    route = ApprovalRoute.objects.get(name="refunds")
    routing_rules.save_route(
        tenant=acme, route=route, name="refunds", condition=REFUNDS, group=billing, fallback_group=leads, actor="test"
    )
    refund = _refund(acme, agent)
    assert refund.fallback_group == leads
    assert refund.pk not in _listed(lead)
    with pytest.raises(NotInRoutedGroup):
        decide_approval(approval=refund, user=lead, decision="approve")

    with django_capture_on_commit_callbacks(execute=True):
        assert escalate_overdue_approvals(now=timezone.now() + timedelta(hours=2)) == 1
    assert lead.email in mail.outbox[-1].to
    assert refund.events.get(action="escalated").detail["fallback_group"] == "billing leads"
    assert refund.pk in _listed(lead) and refund.pk in _listed(approver)  # both groups now
    refund.refresh_from_db()
    decide_approval(approval=refund, user=lead, decision="decline", reason="not without the ticket")
    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.DECLINED and refund.decided_by == lead


def test_the_one_rule_agrees_from_both_sides(acme, agent, billing, approver, support_approver, overseer):
    """`routed_to` (the request lists) and `deciders` (e-mails, votes) are one rule read two ways."""
    refund, other = _refund(acme, agent), _other_call(acme, agent)
    for request in (refund, other):
        for user in (approver, support_approver, overseer):
            listed = ApprovalRequest.objects.routed_to(user).filter(pk=request.pk).exists()
            assert listed == request.deciders().filter(pk=user.pk).exists() == request.routed_to_user(user)


# --- managing groups and routes -------------------------------------------------------------------


def test_only_approvers_of_the_tenant_join_its_groups(acme, globex, billing, viewer, outsider):
    for user in (viewer, outsider, None):
        with pytest.raises(routing_rules.RoutingError) as refused:
            routing_rules.add_group_member(group=billing, user=user, actor="test")
        assert refused.value.code == "not_an_approver"
    assert list(billing.members.values_list("username", flat=True)) == ["approver"]


def test_a_group_a_route_uses_cannot_be_deleted(acme, agent, billing):
    with pytest.raises(routing_rules.RoutingError) as refused:
        routing_rules.delete_group(group=billing, actor="test")
    assert refused.value.code == "group_in_use"
    _refund(acme, agent)
    ApprovalRoute.objects.all().delete()
    with pytest.raises(routing_rules.RoutingError) as refused:
        routing_rules.delete_group(group=billing, actor="test")
    assert refused.value.code == "group_has_pending"


def test_the_api_manages_groups_and_routes(acme, tenant_admin, approver, agent):
    api = _api(tenant_admin)
    created = api.post(reverse("approvals_api:approval_groups", args=["acme"]), {"name": "billing"}, format="json")
    assert created.status_code == 201, created.content
    group_id = created.json()["id"]
    joined = api.post(
        reverse("approvals_api:approval_group_members", args=[group_id]), {"username": "approver"}, format="json"
    )
    assert joined.status_code == 200 and joined.json()["members"] == ["approver"]
    route = api.post(
        reverse("approvals_api:approval_routes", args=["acme"]),
        {"name": "refunds", "condition": REFUNDS, "group": "billing"},
        format="json",
    )
    assert route.status_code == 201, route.content
    assert route.json() | {"id": 0} == {
        "id": 0,
        "tenant": "acme",
        "position": 0,
        "name": "refunds",
        "condition": REFUNDS,
        "group": "billing",
        "fallback_group": None,
    }
    assert _refund(acme, agent).group_id == group_id
    preview = api.post(reverse("approvals_api:approval_route_preview", args=["acme"]), {"condition": REFUNDS})
    assert preview.status_code == 200 and preview.json()["results"][0]["matches"] is True
    assert preview.json()["results"][0]["routed_to"] == "billing"


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"name": "r", "condition": "skill.namespace ==", "group": "billing"}, "invalid_condition", "condition"),
        ({"name": "r", "condition": "skill.namespace", "group": "billing"}, "invalid_condition", "condition"),
        ({"name": "r", "condition": "nope.x == 1", "group": "billing"}, "invalid_condition", "condition"),
        ({"name": "r", "condition": "true", "group": "no such group"}, "unknown_group", "group"),
        ({"name": "refunds", "condition": "true", "group": "billing"}, "duplicate_name", "name"),
        (
            {"name": "r", "condition": "true", "group": "billing", "fallback_group": "billing"},
            "same_fallback",
            "fallback_group",
        ),
    ],
)
def test_a_bad_route_is_a_400_naming_the_problem(acme, billing, tenant_admin, body, code, field):
    response = _api(tenant_admin).post(reverse("approvals_api:approval_routes", args=["acme"]), body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code and response.json()["error"]["field"] == field
    assert ApprovalRoute.objects.count() == 1


def test_a_route_may_not_name_another_tenants_group(acme, globex, billing, tenant_admin):
    theirs = ApproverGroup.objects.create(tenant=globex, name="globex-billing")
    with pytest.raises(routing_rules.RoutingError) as refused:
        routing_rules.save_route(tenant=acme, name="x", condition="true", group=theirs, actor="test")
    assert refused.value.code == "unknown_group"
    response = _api(tenant_admin).post(
        reverse("approvals_api:approval_routes", args=["acme"]),
        {"name": "x", "condition": "true", "group": "globex-billing"},
        format="json",
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "unknown_group"


def test_another_tenants_admin_can_neither_see_nor_change_acmes_routing(acme, billing, outsider):
    route = ApprovalRoute.objects.get(name="refunds")
    api = _api(outsider)
    assert api.get(reverse("approvals_api:approval_groups", args=["acme"])).status_code == 404
    assert api.get(reverse("approvals_api:approval_group", args=[billing.pk])).status_code == 404
    assert api.delete(reverse("approvals_api:approval_group", args=[billing.pk])).status_code == 404
    joined = api.post(
        reverse("approvals_api:approval_group_members", args=[billing.pk]), {"username": "outsider"}, format="json"
    )
    assert joined.status_code == 404
    changed = api.put(
        reverse("approvals_api:approval_route", args=[route.pk]),
        {"name": "refunds", "condition": "false", "group": "billing"},
        format="json",
    )
    assert changed.status_code == 404
    assert api.post(reverse("approvals_api:approval_route_move", args=[route.pk]), {"position": 0}).status_code == 404
    assert api.delete(reverse("approvals_api:approval_route", args=[route.pk])).status_code == 404
    console = login(Client(), outsider)
    assert console.get(reverse("approvals:routing", args=["acme"])).status_code == 404
    assert console.post(reverse("approvals:route_delete", args=[route.pk])).status_code == 404
    assert (
        console.post(
            reverse("approvals:group_members", args=[billing.pk]), {"user": outsider.pk, "action": "add"}
        ).status_code
        == 404
    )
    route.refresh_from_db()
    assert route.condition == REFUNDS and list(billing.members.values_list("username", flat=True)) == ["approver"]


@pytest.mark.parametrize("who", ["viewer", "approver"])
def test_members_without_the_admin_role_get_403(who, request, acme, billing):
    user = request.getfixturevalue(who)
    route = ApprovalRoute.objects.get(name="refunds")
    api = _api(user)
    assert api.get(reverse("approvals_api:approval_groups", args=["acme"])).status_code == 403
    assert api.get(reverse("approvals_api:approval_route", args=[route.pk])).status_code == 403
    assert api.delete(reverse("approvals_api:approval_route", args=[route.pk])).status_code == 403
    console = login(Client(), user)
    assert console.get(reverse("approvals:routing", args=["acme"])).status_code == 403
    assert console.post(reverse("approvals:group_create", args=["acme"]), {"name": "mine"}).status_code == 403
    assert console.post(reverse("approvals:route_delete", args=[route.pk])).status_code == 403
    assert ApprovalRoute.objects.filter(pk=route.pk).exists() and ApproverGroup.objects.count() == 1


def test_the_console_page_edits_and_previews(acme, agent, billing, tenant_admin, approver):
    refund, other = _refund(acme, agent), _other_call(acme, agent)
    console = login(Client(), tenant_admin)
    page = console.get(reverse("approvals:routing", args=["acme"]), {"preview": "skill.name == 'iam.revoke_access'"})
    assert page.status_code == 200
    body = page.content.decode()
    assert "refunds" in body and "billing" in body and "<strong>1</strong> of the last 2 requests match" in body
    assert f"#{refund.pk}" in body and f"#{other.pk}" in body

    bad = console.post(
        reverse("approvals:route_create", args=["acme"]),
        {"name": "broken", "condition": "skill.name ==", "group": billing.pk},
    )
    assert bad.status_code == 400 and "Syntax error" in bad.content.decode()
    assert not ApprovalRoute.objects.filter(name="broken").exists()

    added = console.post(reverse("approvals:group_create", args=["acme"]), {"name": "iam"})
    assert added.status_code == 302
    iam = ApproverGroup.objects.get(name="iam")
    assert (
        console.post(
            reverse("approvals:group_members", args=[iam.pk]), {"user": approver.pk, "action": "add"}
        ).status_code
        == 302
    )
    saved = console.post(
        reverse("approvals:route_create", args=["acme"]),
        {"name": "access", "condition": 'skill.namespace == "iam"', "group": iam.pk},
    )
    assert saved.status_code == 302
    assert _other_call(acme, agent).group == iam
    assert console.get(reverse("approvals:routing", args=["acme"])).status_code == 200
    assert console.post(reverse("approvals:routing", args=["acme"])).status_code == 405


def test_a_huge_or_broken_preview_condition_is_explained_not_run(acme, billing, tenant_admin):
    console = login(Client(), tenant_admin)
    for condition, says in [("true || " * 700 + "true", "at most 4000 characters"), ("args.", "Syntax error")]:
        page = console.get(reverse("approvals:routing", args=["acme"]), {"preview": condition})
        assert page.status_code == 200 and says in page.content.decode()


def _queries_to_list(user, path: str, **query) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = login(Client(), user)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(path, query).status_code == 200
    return len(queries.captured_queries)


@pytest.mark.parametrize(
    ("path", "query"),
    [
        (reverse("approvals:inbox"), {}),
        (reverse("approvals:inbox"), {"group": "all"}),
        (reverse("approvals_api:approval_list"), {"group": "all"}),
    ],
)
def test_listing_routed_requests_costs_the_same_for_two_or_six(path, query, acme, agent, billing, overseer):
    routing_rules.add_group_member(group=billing, user=overseer, actor="test")
    for _ in range(2):
        _refund(acme, agent)
    two = _queries_to_list(overseer, path, **query)
    for _ in range(4):
        _refund(acme, agent)
    assert _queries_to_list(overseer, path, **query) == two


def test_an_approver_outside_the_group_never_unseals_the_real_arguments(
    acme, agent, billing, approver, support_approver
):
    """The request page is readable by the tenant's members, but only those the routing lets decide see the
    real values: bob opening billing's refund by its URL sees the redacted form kept at rest."""
    from approvals.presentation import shown_arguments

    refund = _refund(acme, agent)
    assert refund.group == billing
    assert shown_arguments(refund, approver) != refund.action["arguments"]  # billing sees the real call
    assert shown_arguments(refund, support_approver) == refund.action["arguments"]
    page = login(Client(), support_approver).get(reverse("approvals:detail", args=[refund.pk]))
    assert page.status_code == 200 and page.context["can_decide"] is False


def test_an_admin_who_approves_elsewhere_sees_other_groups_requests_sealed_in_the_oversight_list(
    acme, agent, billing, approver, overseer
):
    """The oversight list shows an admin every request; deciding and the real values stay with the routed group.
    overseer approves acme's unrouted calls, so the tenant alone must not unseal billing's refund."""
    refund, other = _refund(acme, agent), _other_call(acme, agent)
    redacted = refund.action["arguments"]
    rows = {
        row["id"]: row
        for row in _api(overseer).get(reverse("approvals_api:approval_list"), {"group": "all"}).json()["results"]
    }
    assert rows[refund.pk]["proposed_action"]["arguments"] == redacted
    assert (
        rows[other.pk]["proposed_action"]["arguments"] != other.action["arguments"]
    )  # routed to everyone: overseer decides it
    billing_rows = _api(approver).get(reverse("approvals_api:approval_list")).json()["results"]
    assert next(r for r in billing_rows if r["id"] == refund.pk)["proposed_action"]["arguments"] != redacted
    page = login(Client(), overseer).get(reverse("approvals:inbox"), {"group": "all"})
    cards = {card["approval"].pk: card for card in page.context["cards"]}
    assert cards[refund.pk]["action"].unsealed is False and cards[refund.pk]["routed_to_me"] is False
    assert cards[other.pk]["action"].unsealed is True and cards[other.pk]["routed_to_me"] is True


def test_an_admin_who_is_no_approver_is_told_who_decides_an_unrouted_request(acme, agent, tenant_admin):
    other = _other_call(acme, agent)
    page = _inbox_ids(tenant_admin, group="all")
    assert f'id="approval-{other.pk}"' in page
    assert "Routed to every approver of acme; you are not one of them." in page
    assert "Routed to the approver group :" not in page
