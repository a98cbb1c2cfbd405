"""Stop a run, suspend an agent, freeze a tenant: tried by the people who may, and by everyone who must not
(another tenant's admin, a viewer, an approver where only admins act, an agent key, a read-only token),
through the real API, gate and resume path."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval, resume_approval
from console.models import Agent, OperatorAction, Tenant, TokenScope
from console.services import create_agent, create_personal_token
from runs.models import CallStatus, Run, RunStatus, ToolCall
from tests.conftest import login
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.test_calls_api import catalog  # noqa: F401  (fixture)
from traces.models import Span

pytestmark = pytest.mark.django_db


def _human(user, *, token_scopes=None) -> APIClient:
    client = APIClient()
    if token_scopes is None:
        client.force_login(user)
    else:
        _, key = create_personal_token(user=user, name="ops", scopes=token_scopes)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def _stop(client, run_id, reason="runaway refunds"):
    return client.post(reverse("runs_api:run_stop", args=[run_id]), {"reason": reason}, format="json")


def _suspend(client, agent_id, **body):
    return client.post(reverse("agent-suspend", args=[agent_id]), {"reason": "looping", **body}, format="json")


def _freeze(client, slug="acme", reason="incident 42: bad refunds"):
    return client.post(reverse("tenant-freeze", args=[slug]), {"reason": reason}, format="json")


def _error(response) -> dict:
    return response.json()["error"]


# --- stop a run -----------------------------------------------------------------------------------


def test_an_approver_stops_a_run_its_approval_is_cancelled_and_the_agent_is_told_who_and_why(
    agent_client,
    approver,
    catalog,  # noqa: F811
):
    run = start_run(agent_client)
    [pending] = post_calls(agent_client, run["run_id"], [call("w1", "admin.wipe_echo")]).json()["results"]
    assert pending["status"] == "approval_required"

    response = _stop(_human(approver), run["run_id"])
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "stopped"
    stored = Run.objects.get(pk=run["run_id"])
    assert (stored.status, stored.stopped_by_label, stored.status_reason) == ("stopped", "approver", "runaway refunds")
    approval = ApprovalRequest.objects.get(pk=pending["approval_id"])
    assert approval.status == ApprovalStatus.CANCELLED
    assert approval.decline_reason == "approver stopped the run: runaway refunds"

    refused = post_calls(agent_client, run["run_id"], [call("r1", "orders.echo", {"order_id": "ord_1"})])
    assert refused.status_code == 409
    assert _error(refused)["code"] == "run_stopped" and "approver stopped this run: runaway refunds" in str(
        _error(refused)["message"]
    )
    read = agent_client.get(reverse("runs_api:run_detail", args=[run["run_id"]])).json()
    assert read["status"] == "stopped" and read["error"]["code"] == "run_stopped"
    assert read["error"]["stopped_by"] == "approver"

    [audit] = OperatorAction.objects.filter(action="run_stopped")
    assert (audit.actor, audit.target, audit.reason) == (approver, run["run_id"], "runaway refunds")
    assert Span.objects.filter(trace__run_id=run["run_id"], name="run stopped by approver").exists()


def test_stopping_twice_is_idempotent_and_a_finished_run_cannot_be_stopped(agent_client, approver, catalog):  # noqa: F811
    run = start_run(agent_client)
    client = _human(approver)
    assert _stop(client, run["run_id"]).status_code == 200
    assert _stop(client, run["run_id"], reason="again").status_code == 200
    assert Run.objects.get(pk=run["run_id"]).status_reason == "runaway refunds"
    assert OperatorAction.objects.filter(action="run_stopped").count() == 1
    finished = start_run(agent_client)
    agent_client.post(reverse("runs_api:run_finish", args=[finished["run_id"]]), {"status": "completed"}, format="json")
    conflict = _stop(client, finished["run_id"])
    assert conflict.status_code == 409 and _error(conflict)["code"] == "run_closed"
    assert Run.objects.get(pk=finished["run_id"]).status == RunStatus.COMPLETED


def test_an_admin_and_an_approvers_token_may_stop_a_run(agent_client, approver, tenant_admin, catalog):  # noqa: F811
    assert _stop(_human(tenant_admin), start_run(agent_client)["run_id"]).status_code == 200
    token = _human(approver, token_scopes=[TokenScope.READ, TokenScope.APPROVE])
    assert _stop(token, start_run(agent_client)["run_id"]).status_code == 200


@pytest.mark.parametrize("who", ["viewer", "outsider", "read_token", "agent", "anonymous"])
def test_who_must_not_stop_a_run_cannot(who, request, agent_client, viewer, outsider, approver, catalog):  # noqa: F811
    run = start_run(agent_client)
    client, expected = {
        "viewer": (lambda: _human(viewer), 403),
        "outsider": (lambda: _human(outsider), 404),  # another tenant's admin and approver: it does not exist
        "read_token": (lambda: _human(approver, token_scopes=[TokenScope.READ]), 403),
        "agent": (lambda: agent_client, 403),  # an agent cannot stop runs, not even its own
        "anonymous": (lambda: APIClient(), 401),
    }[who]
    response = _stop(client(), run["run_id"])
    assert response.status_code == expected, response.content
    assert Run.objects.get(pk=run["run_id"]).status == RunStatus.RUNNING
    assert not OperatorAction.objects.exists()


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "x" * 301}, {"reason": ["a"]}, []])
def test_a_stop_without_a_proper_reason_is_a_400_and_changes_nothing(body, agent_client, approver, catalog):  # noqa: F811
    run = start_run(agent_client)
    response = _human(approver).post(reverse("runs_api:run_stop", args=[run["run_id"]]), body, format="json")
    assert response.status_code == 400 and _error(response)["code"] in ("invalid_stop", "parse_error")
    assert Run.objects.get(pk=run["run_id"]).status == RunStatus.RUNNING


def test_an_approved_call_still_queued_when_the_run_is_stopped_refuses_naming_the_stop(
    agent_client,
    approver,
    second_approver,
    catalog,
    monkeypatch,  # noqa: F811
):
    from approvals import tasks

    queued: list[int] = []
    monkeypatch.setattr(tasks.resume_call, "delay_on_commit", queued.append)  # the broker holds it
    run = start_run(agent_client)
    [pending] = post_calls(agent_client, run["run_id"], [call("w1", "admin.wipe_echo")]).json()["results"]
    approval = ApprovalRequest.objects.get(pk=pending["approval_id"])
    decide_approval(approval=approval, user=approver, decision="approve")
    assert queued == [approval.pk]
    assert _stop(_human(second_approver), run["run_id"]).status_code == 200

    tasks.resume_call.apply(args=[approval.pk])  # the queued resume is delivered after the stop
    approval.refresh_from_db()
    call_row = ToolCall.objects.get(pk=approval.call_id)
    assert approval.status == ApprovalStatus.FAILED
    assert approval.outcome["error"]["code"] == "run_stopped"
    assert "approver2 stopped this run" in approval.outcome["error"]["message"]
    assert call_row.status == CallStatus.DENIED and call_row.result["error"]["code"] == "run_stopped"


# --- suspend an agent -----------------------------------------------------------------------------


def test_a_suspended_agents_key_still_authenticates_but_no_run_starts_and_no_call_runs(
    agent_client,
    agent,
    tenant_admin,
    catalog,  # noqa: F811
):
    run = start_run(agent_client)
    response = _suspend(_human(tenant_admin), agent.pk, minutes=60)
    assert response.status_code == 200, response.content
    assert response.json()["suspended"] is True and response.json()["suspended_by"] == "admin"

    assert agent_client.get(reverse("agent-whoami")).status_code == 200  # the key is valid
    refused_start = agent_client.post(reverse("runs_api:run_create"), {"end_user": "u"}, format="json")
    assert refused_start.status_code == 403 and _error(refused_start)["code"] == "agent_suspended"
    assert _error(refused_start)["suspended_until"] and "admin suspended agent support-bot" in str(
        _error(refused_start)["message"]
    )
    refused_call = post_calls(agent_client, run["run_id"], [call("r1", "orders.echo", {"order_id": "ord_1"})])
    assert refused_call.status_code == 403 and _error(refused_call)["code"] == "agent_suspended"
    assert not ToolCall.objects.filter(run_id=run["run_id"]).exists()
    [audit] = OperatorAction.objects.filter(action="agent_suspended")
    assert (audit.actor, audit.target, audit.reason) == (tenant_admin, "support-bot", "looping")


def test_resuming_lets_the_agent_work_again_and_a_timed_suspension_lapses_by_itself(
    agent_client,
    agent,
    tenant_admin,
    catalog,  # noqa: F811
):
    client = _human(tenant_admin)
    _suspend(client, agent.pk)  # until resumed
    assert agent_client.post(reverse("runs_api:run_create"), {"end_user": "u"}, format="json").status_code == 403
    resumed = client.post(reverse("agent-resume", args=[agent.pk]))
    assert resumed.status_code == 200 and resumed.json()["suspended"] is False
    run = start_run(agent_client)
    ok = post_calls(agent_client, run["run_id"], [call("r1", "orders.echo", {"order_id": "ord_1"})])
    assert ok.json()["results"][0]["status"] == "ok"

    _suspend(client, agent.pk, minutes=5)
    Agent.objects.filter(pk=agent.pk).update(suspended_until=timezone.now() - timedelta(seconds=1))  # 5 minutes on
    again = post_calls(agent_client, run["run_id"], [call("r2", "orders.echo", {"order_id": "ord_1"})])
    assert again.status_code == 200 and again.json()["results"][0]["status"] == "ok"
    actions = list(OperatorAction.objects.order_by("pk").values_list("action", flat=True))
    assert actions == ["agent_suspended", "agent_resumed", "agent_suspended"]


@pytest.mark.parametrize("who", ["approver", "viewer", "outsider", "agent"])
def test_only_the_tenants_admins_may_suspend_or_resume(who, agent_client, agent, approver, viewer, outsider):
    client, expected = {
        "approver": (_human(approver), 403),
        "viewer": (_human(viewer), 403),
        "outsider": (_human(outsider), 404),  # globex's admin
        "agent": (agent_client, 403),
    }[who]
    assert _suspend(client, agent.pk).status_code == expected
    assert client.post(reverse("agent-resume", args=[agent.pk])).status_code == expected
    agent.refresh_from_db()
    assert agent.suspended_at is None and not OperatorAction.objects.exists()


@pytest.mark.parametrize("body", [{"minutes": 0}, {"minutes": "soon"}, {"minutes": 10**9}, {"reason": ""}])
def test_a_malformed_suspension_is_a_400_and_changes_nothing(body, agent, tenant_admin):
    response = _suspend(_human(tenant_admin), agent.pk, **body)
    assert response.status_code == 400 and _error(response)["code"] == "invalid_suspension"
    agent.refresh_from_db()
    assert agent.suspended_at is None


def test_a_suspended_agents_approved_call_waits_and_runs_after_resume(
    agent_client,
    agent,
    approver,
    tenant_admin,
    catalog,
    settings,
    monkeypatch,  # noqa: F811
):
    from approvals import tasks
    from runs.services import AgentSuspended

    queued: list[int] = []
    monkeypatch.setattr(tasks.resume_call, "delay_on_commit", queued.append)
    run = start_run(agent_client)
    [pending] = post_calls(agent_client, run["run_id"], [call("w1", "admin.wipe_echo")]).json()["results"]
    _suspend(_human(tenant_admin), agent.pk)
    approval = ApprovalRequest.objects.get(pk=pending["approval_id"])
    decide_approval(approval=approval, user=approver, decision="approve")

    with pytest.raises(AgentSuspended) as held:
        resume_approval(approval_id=approval.pk)
    assert held.value.retry_after == settings.AIRLOCK_SUSPENDED_RECHECK_SECONDS
    assert ToolCall.objects.get(pk=approval.call_id).status == CallStatus.AWAITING_APPROVAL  # waiting, not refused
    with pytest.raises(AgentSuspended):
        resume_approval(approval_id=approval.pk)  # the next look: still held, one span on the timeline
    assert Span.objects.filter(call_id=approval.call_id, name="held: agent suspended").count() == 1

    _human(tenant_admin).post(reverse("agent-resume", args=[agent.pk]))
    resume_approval(approval_id=approval.pk)  # the retry after the resume
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED
    assert ToolCall.objects.get(pk=approval.call_id).status == CallStatus.SUCCEEDED


# --- freeze a tenant ------------------------------------------------------------------------------


def test_a_frozen_tenant_runs_reads_and_denies_every_other_effect(agent_client, tenant_admin, catalog):  # noqa: F811
    run = start_run(agent_client)
    response = _freeze(_human(tenant_admin))
    assert response.status_code == 200 and response.json()["frozen"] is True
    results = post_calls(
        agent_client,
        run["run_id"],
        [
            call("r1", "orders.echo", {"order_id": "ord_1"}),
            call("w1", "orders.write_echo"),
            call("x1", "support.external_echo"),
            call("d1", "admin.wipe_echo"),
            call("f1", "drafts.draft_echo"),
        ],
    ).json()["results"]
    assert results[0]["status"] == "ok"
    for result in results[1:]:
        assert result["status"] == "error" and result["error"]["code"] == "tenant_frozen", result
        assert "admin froze tenant acme: incident 42: bad refunds" in result["error"]["message"]
    assert not ApprovalRequest.objects.exists()  # nothing waits to run after the freeze either
    assert ToolCall.objects.get(run_id=run["run_id"], call_id="w1").status == CallStatus.DENIED

    unfrozen = _human(tenant_admin).post(reverse("tenant-unfreeze", args=["acme"]))
    assert unfrozen.status_code == 200 and unfrozen.json()["frozen"] is False
    after = post_calls(agent_client, run["run_id"], [call("w2", "orders.write_echo")]).json()["results"]
    assert after[0]["status"] == "ok"
    actions = list(OperatorAction.objects.order_by("pk").values_list("action", "actor__username"))
    assert actions == [("tenant_frozen", "admin"), ("tenant_unfrozen", "admin")]


def test_an_approved_write_is_refused_when_the_tenant_froze_after_the_approval(
    agent_client,
    approver,
    tenant_admin,
    catalog,  # noqa: F811
):
    run = start_run(agent_client)
    [pending] = post_calls(agent_client, run["run_id"], [call("d1", "admin.wipe_echo")]).json()["results"]
    _freeze(_human(tenant_admin))
    approval = ApprovalRequest.objects.get(pk=pending["approval_id"])
    decide_approval(approval=approval, user=approver, decision="approve")
    resume_approval(approval_id=approval.pk)  # what the queued resume does: the live check first
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.FAILED and approval.outcome["error"]["code"] == "tenant_frozen"


@pytest.mark.parametrize("who", ["approver", "viewer", "outsider", "agent"])
def test_only_the_tenants_admins_may_freeze_or_unfreeze(who, acme, agent_client, approver, viewer, outsider):
    client, expected = {
        "approver": (_human(approver), 403),
        "viewer": (_human(viewer), 403),
        "outsider": (_human(outsider), 404),
        "agent": (agent_client, 403),
    }[who]
    assert _freeze(client).status_code == expected
    Tenant.objects.filter(pk=acme.pk).update(frozen_at=timezone.now(), frozen_by_label="admin")
    assert client.post(reverse("tenant-unfreeze", args=["acme"])).status_code == expected
    assert Tenant.objects.get(pk=acme.pk).frozen_at is not None and not OperatorAction.objects.exists()


def test_an_outsider_cannot_freeze_their_own_tenant_into_acme_or_learn_it_exists(outsider, globex):
    assert _freeze(_human(outsider), slug="globex").status_code == 200
    assert _freeze(_human(outsider), slug="no-such-tenant").status_code == 404
    assert not Tenant.objects.filter(slug="acme").exists() or Tenant.objects.get(slug="acme").frozen_at is None


# --- console --------------------------------------------------------------------------------------


def test_the_run_page_offers_stop_to_approvers_only_and_the_form_stops_the_run(
    client,
    agent_client,
    approver,
    viewer,
    catalog,  # noqa: F811
):
    run = start_run(agent_client)
    page = reverse("runs:run_detail", args=[run["run_id"]])
    assert b'id="stop-run"' not in login(client, viewer).get(page).content
    assert client.post(reverse("runs:run_stop", args=[run["run_id"]]), {"reason": "no"}).status_code == 403
    assert b'id="stop-run"' in login(client, approver).get(page).content
    assert client.get(reverse("runs:run_stop", args=[run["run_id"]])).status_code == 405
    response = client.post(reverse("runs:run_stop", args=[run["run_id"]]), {"reason": "looping on refunds"})
    assert response.status_code == 302
    shown = client.get(page).content.decode()
    assert "by approver" in shown and "looping on refunds" in shown and 'id="stop-run"' not in shown


def test_the_console_suspends_and_resumes_an_agent_for_admins_only(client, agent, tenant_admin, approver):
    suspend = reverse("console:agent_suspend", args=["acme", agent.pk])
    assert login(client, approver).post(suspend, {"reason": "x"}).status_code == 403
    login(client, tenant_admin)
    assert client.post(suspend, {"reason": "spamming", "minutes": "15"}).status_code == 302
    agent.refresh_from_db()
    assert agent.suspended_until is not None and agent.suspend_reason == "spamming"
    assert "suspended" in client.get(reverse("console:agent_list", args=["acme"])).content.decode()
    client.post(reverse("console:agent_resume", args=["acme", agent.pk]))
    agent.refresh_from_db()
    assert agent.suspended_at is None


def test_a_frozen_tenant_shows_its_banner_on_every_page_to_its_members_only(
    client, acme, tenant_admin, viewer, outsider
):
    login(client, tenant_admin)
    assert client.post(reverse("console:tenant_freeze", args=["acme"]), {"reason": "incident 42"}).status_code == 302
    for user in (tenant_admin, viewer):
        login(client, user)
        for page in (reverse("runs:run_list"), reverse("approvals:inbox"), reverse("console:home")):
            assert 'id="frozen-banner"' in client.get(page).content.decode(), (user, page)
    login(client, outsider)
    assert 'id="frozen-banner"' not in client.get(reverse("runs:run_list")).content.decode()
    assert client.get(reverse("console:tenant_controls", args=["acme"])).status_code == 404
    login(client, viewer)
    assert client.post(reverse("console:tenant_unfreeze", args=["acme"])).status_code == 403
    login(client, tenant_admin)
    client.post(reverse("console:tenant_unfreeze", args=["acme"]))
    assert 'id="frozen-banner"' not in client.get(reverse("runs:run_list")).content.decode()


def test_the_stop_is_on_the_runs_timeline(client, agent_client, approver, catalog):  # noqa: F811
    run = start_run(agent_client)
    _stop(_human(approver), run["run_id"], reason="looping on refunds")
    timeline = login(client, approver).get(reverse("traces:for_run", args=[run["run_id"]]), follow=True)
    assert timeline.status_code == 200 and "run stopped by approver" in timeline.content.decode()


def test_the_mcp_endpoint_refuses_a_suspended_agents_valid_key_with_403(agent_and_key, tenant_admin):
    from mcp_gateway.auth import agent_for

    agent, key = agent_and_key
    _suspend(_human(tenant_admin), agent.pk)
    refusal = agent_for(authorization=f"Bearer {key}", remote_addr="127.0.0.1")
    assert refusal.status == 403 and refusal.body["error"]["code"] == "agent_suspended"
    _human(tenant_admin).post(reverse("agent-resume", args=[agent.pk]))
    assert agent_for(authorization=f"Bearer {key}", remote_addr="127.0.0.1") == agent


def _incident_spans(run_id) -> list[str]:
    return list(
        Span.objects.filter(trace__run_id=run_id, attributes__has_key="airlock.operator.action").values_list(
            "name", flat=True
        )
    )


def test_a_suspension_and_a_freeze_appear_on_the_open_runs_they_touch_and_nowhere_else(
    agent_client,
    agent,
    outsider_agent_client,
    tenant_admin,
    catalog,  # noqa: F811
):
    """Each open run of the suspended agent, then each open run of the frozen tenant, gets the control on its
    timeline; a finished run of the agent and another tenant's run get nothing."""
    open_run, finished = start_run(agent_client), start_run(agent_client)
    Run.objects.filter(pk=finished["run_id"]).update(status=RunStatus.COMPLETED)
    _, other_key = create_agent(tenant=agent.tenant, name="billing-bot", role="support")
    colleague = APIClient()
    colleague.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    colleagues_run, globex_run = start_run(colleague), start_run(outsider_agent_client)

    assert _suspend(_human(tenant_admin), agent.pk, minutes=30).status_code == 200
    assert _incident_spans(open_run["run_id"]) == ["agent suspended by admin"]
    assert _incident_spans(colleagues_run["run_id"]) == _incident_spans(finished["run_id"]) == []

    assert _freeze(_human(tenant_admin)).status_code == 200
    assert sorted(_incident_spans(open_run["run_id"])) == ["agent suspended by admin", "tenant frozen by admin"]
    assert _incident_spans(colleagues_run["run_id"]) == ["tenant frozen by admin"]
    assert _incident_spans(globex_run["run_id"]) == _incident_spans(finished["run_id"]) == []
    [frozen] = Span.objects.filter(trace__run_id=colleagues_run["run_id"], name="tenant frozen by admin")
    assert frozen.attributes["airlock.operator.reason"] == "incident 42: bad refunds"
