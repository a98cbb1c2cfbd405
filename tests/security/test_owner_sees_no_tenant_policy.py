"""A skill owner outside the calling tenant reads no tenant policy, written as the attack.

olivia owns `support.lookup` and `support.update` (team support-tools) and belongs to globex only.
acme's agents call both skills under acme's own policy: a deny rule and an allow rule whose verdict
the taint floor raised. olivia may read the spans of her skills in acme's traces, so she opens the
"why" panel (the page, and the htmx partial asked for directly) and the span panel of each call,
hoping for acme's rule ids, reasons, policy version and floor. She gets the verdicts and that the
tenant's policy decided, nothing more; an acme member and a platform admin see it all, and a globex
user with no relation to the skills gets 404.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.services import decide_approval
from console.models import Role
from policies.models import Policy
from runs.models import ToolCall
from tests.conftest import make_user
from tests.runs.conftest import call, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule
from traces.models import Span, Trace

pytestmark = pytest.mark.django_db

SECRET_REASON = "acme-secret-policy-reason"
SECRET_ALLOW_REASON = "acme-secret-allow-reason"
TAINT_SOURCE = "acme-secret-inbox of ann"
APPROVER = "acme-secret-approver"


@pytest.fixture
def olivia(globex, owner_team):
    """An owner of the called skills who is no member of acme."""
    user = make_user("olivia", tenant=globex, roles=[Role.VIEWER])
    owner_team.members.add(user)
    return user


@pytest.fixture
def acme_calls(acme, agent_client, owner_team, django_capture_on_commit_callbacks):
    grant(acme, "support.*")
    policy = published_policy(
        [
            rule("acme-secret-deny", "deny", "skill.name == 'support.lookup'", reason=SECRET_REASON),
            rule("acme-secret-allow", "allow", "skill.name == 'support.update'", reason=SECRET_ALLOW_REASON),
        ],
        scope="tenant",
        tenant=acme,
        name="acme rules",
    )
    make_skill("support.lookup", adapter="python:test.echo", publish=False)
    make_skill("support.update", effect="write", adapter="python:test.echo")  # publishes the snapshot
    run = start_run(agent_client)
    response = agent_client.post(
        reverse("runs_api:run_calls", args=[run["run_id"]]),
        {
            "calls": [
                call("c-denied", "support.lookup", {"q": "x"}, taint=TAINT_SOURCE),
                call("c-floored", "support.update", {"q": "y"}),
            ]
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    assert [r["status"] for r in response.json()["results"]] == ["error", "approval_required"]
    floored = ToolCall.objects.get(call_id="c-floored")
    assert floored.decision["floor_id"] == "floor:taint"  # the allow rule decided; the taint floor raised it
    approver = make_user(APPROVER, tenant=acme, roles=[Role.APPROVER, Role.VIEWER])
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=ApprovalRequest.objects.get(call=floored), user=approver, decision="approve")
    return Trace.objects.get(run_id=run["run_id"]), policy


def secrets_of(policy: Policy) -> list[str]:
    """What acme's policy would give away: its rule ids, reasons, version, the floor, the taint, and the
    acme approver who decided the floored call."""
    return [
        APPROVER,
        "acme-secret-deny",
        "acme-secret-allow",
        SECRET_REASON,
        SECRET_ALLOW_REASON,
        f"p{policy.pk}@v1",
        "acme rules",
        "floor:taint",
        "<dt>floor</dt>",
        "untrusted content",
        "acme-secret-inbox",
    ]


def pages(client, trace: Trace) -> dict[str, str]:
    """Every page of the trace that shows a call's decision: why page, why partial, each span's panel,
    the timeline."""
    bodies = {"timeline": client.get(reverse("traces:detail", args=[trace.pk]))}
    for call_id in ("c-denied", "c-floored"):
        tool_call = ToolCall.objects.get(call_id=call_id)
        why = reverse("traces:why", args=[trace.pk, tool_call.pk])
        bodies[f"{call_id} why page"] = client.get(why)
        bodies[f"{call_id} why partial"] = client.get(why, HTTP_HX_REQUEST="true")
        for span in Span.objects.filter(trace=trace, call=tool_call):
            bodies[f"{call_id} {span.kind} span panel"] = client.get(
                reverse("traces:span", args=[trace.pk, span.span_id])
            )
    for name, response in bodies.items():
        assert response.status_code == 200, name
    return {name: response.content.decode() for name, response in bodies.items()}


def test_an_owner_outside_the_tenant_sees_verdicts_but_no_rule_reason_version_or_floor(client, acme_calls, olivia):
    trace, policy = acme_calls
    client.force_login(olivia)

    bodies = pages(client, trace)

    for name, body in bodies.items():
        leaked = [secret for secret in secrets_of(policy) if secret in body]
        assert not leaked, f"{name} shows acme's {leaked}"
    for call_id, verdict in (("c-denied", "deny"), ("c-floored", "confirm")):
        for kind in ("why page", "why partial"):
            body = bodies[f"{call_id} {kind}"]
            assert body.count('<div class="q">') == 8, f"{call_id} {kind}"
            assert f">{verdict}</span>" in body and "the calling tenant&#x27;s policy" in body


@pytest.mark.parametrize("member", ["acme viewer", "platform admin"])
def test_a_member_of_the_tenant_and_a_platform_admin_see_the_whole_policy(client, acme_calls, viewer, member):
    trace, policy = acme_calls
    client.force_login(viewer if member == "acme viewer" else make_user("root", superuser=True))

    bodies = pages(client, trace)

    assert "acme-secret-deny" in bodies["c-denied why page"] and SECRET_REASON in bodies["c-denied why partial"]
    assert f"p{policy.pk}@v1" in bodies["c-denied why page"]
    floored = bodies["c-floored why page"]
    assert "acme-secret-allow" in floored and "untrusted content" in floored and "<dt>floor</dt>" in floored
    assert SECRET_REASON in bodies["c-denied tool_call span panel"]
    assert APPROVER in bodies["c-floored approval_decision span panel"]


def test_a_user_with_no_relation_to_the_tenant_or_the_skills_gets_404(client, acme_calls, outsider):
    trace, _ = acme_calls
    client.force_login(outsider)
    tool_call = ToolCall.objects.get(call_id="c-denied")
    span = Span.objects.get(trace=trace, call=tool_call, kind="tool_call")
    why = reverse("traces:why", args=[trace.pk, tool_call.pk])
    assert client.get(why).status_code == 404
    assert client.get(why, HTTP_HX_REQUEST="true").status_code == 404
    assert client.get(reverse("traces:span", args=[trace.pk, span.span_id])).status_code == 404
