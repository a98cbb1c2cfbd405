"""The tool-call endpoint, branch by branch: resolve, validate, authorize, policy, execute."""

import logging

import pytest
from django.urls import reverse

from registry.models import SkillVersion, VersionStatus
from runs.models import CallStatus, Run, ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule

pytestmark = pytest.mark.django_db

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "pattern": "^ord_"}, "email": {"type": "string", "format": "email"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


@pytest.fixture
def catalog(acme):
    skills = {
        "read": make_skill(
            "orders.echo", effect="read", adapter="python:test.echo", schema=ORDER_SCHEMA, publish=False
        ),
        "write": make_skill("orders.write_echo", effect="write", adapter="python:test.echo", publish=False),
        "external": make_skill("support.external_echo", effect="external", adapter="python:test.echo", publish=False),
        "draft": make_skill("drafts.draft_echo", effect="draft", adapter="python:test.echo", publish=False),
        "destructive": make_skill("admin.wipe_echo", effect="destructive", adapter="python:test.echo", publish=False),
        "boom": make_skill("orders.boom", effect="read", adapter="python:test.boom", publish=False),
        "inbox": make_skill(
            "support.read_inbox", effect="read", adapter="python:test.echo", untrusted_output=True, publish=False
        ),
        "admin_only": make_skill("orders.admin_echo", adapter="python:test.echo", roles=["admin"], publish=False),
        "scoped": make_skill("scoped.echo", adapter="python:test.echo", scopes=["orders.read"], publish=False),
        "scoped_ok": make_skill("scopedok.echo", adapter="python:test.echo", scopes=["orders.read"], publish=False),
    }
    for pattern in ("orders.*", "support.*", "drafts.*", "admin.*"):
        grant(acme, pattern)
    grant(acme, "scoped.*", oauth_scopes=["orders.write"])
    grant(acme, "scopedok.*", oauth_scopes=["orders.read", "orders.write"])
    make_skill("billing.not_granted", adapter="python:test.echo")  # publishes the snapshot
    return skills


def run_and_call(agent_client, calls):
    run = start_run(agent_client)
    response = post_calls(agent_client, run["run_id"], calls)
    assert response.status_code == 200, response.content
    return run, response.json()


def test_start_run_pins_snapshot_and_binds_end_user(agent_client, catalog, agent):
    body = start_run(agent_client, callback_url="https://hooks.example.com/airlock")
    run = Run.objects.get(pk=body["run_id"])
    assert body["snapshot"] == run.snapshot.number and body["status"] == "running"
    assert body["trace_id"] == run.pk.hex and len(body["webhook_secret"]) >= 32
    assert (run.end_user, run.end_user_roles, run.agent) == ("u-1", ["customer"], agent)
    assert "webhook_secret" not in start_run(agent_client)


def test_allowed_read_executes_and_returns_content(agent_client, catalog):
    _, body = run_and_call(agent_client, [call("c1", "orders.echo", {"order_id": "ord_1"})])
    [result] = body["results"]
    assert result == {
        "call_id": "c1",
        "status": "ok",
        "is_error": False,
        "content": {"echo": {"order_id": "ord_1"}},
        "skill": {"name": "orders.echo", "version": "1.0.0"},
        "truncated": False,
        "warnings": [],
    }
    stored = ToolCall.objects.get(call_id="c1")
    assert stored.status == CallStatus.SUCCEEDED and stored.verdict == "allow"
    assert stored.decision["rule_id"] == "default:read" and stored.decision["scope"] == "default"


@pytest.mark.parametrize(
    "calls,error_class,code",
    [
        ([call("c1", "orders.nope")], "not_found", "unknown_skill"),
        ([call("c1", "orders.echo", {"order_id": "ord_1"}, version="9.9.9")], "not_found", "unknown_skill"),
        ([call("c1", "orders.echo", {"order_id": "x"})], "validation", "invalid_arguments"),
        (
            [call("c1", "orders.echo", {"order_id": "ord_1", "email": "not-an-email"})],
            "validation",
            "invalid_arguments",
        ),
        ([call("c1", "orders.echo", {})], "validation", "invalid_arguments"),
        ([call("c1", "billing.not_granted")], "authorization", "no_grant"),
        ([call("c1", "orders.admin_echo")], "authorization", "role_not_allowed"),
        ([call("c1", "scoped.echo")], "authorization", "missing_scopes"),
        ([{"name": "orders.echo"}], "validation", "malformed_call"),
        (
            [call("c1", "orders.echo", {"order_id": "ord_1"}), call("c1", "orders.echo", {"order_id": "ord_1"})],
            "validation",
            "duplicate_call_id",
        ),
        ([call("c1", "orders.boom")], "internal", "internal"),
    ],
)
def test_error_branches(agent_client, catalog, calls, error_class, code):
    _, body = run_and_call(agent_client, calls)
    result = body["results"][-1]
    assert result["status"] == "error" and result["is_error"] is True
    assert (result["error"]["class"], result["error"]["code"]) == (error_class, code)


@pytest.mark.parametrize("name", ["scopedok.echo", "orders.echo_unscoped"])
def test_scopes_held_or_unrestricted_grant_pass(agent_client, catalog, name):
    make_skill("orders.echo_unscoped", adapter="python:test.echo", scopes=["orders.read"])
    _, body = run_and_call(agent_client, [call("c1", name)])
    assert body["results"][0]["status"] == "ok", body


def test_unknown_skill_lists_what_the_agent_may_call(agent_client, catalog):
    _, body = run_and_call(agent_client, [call("c1", "orders.nope")])
    available = body["results"][0]["error"]["available"]
    assert "orders.echo" in available and "billing.not_granted" not in available
    assert "orders.admin_echo" not in available  # granted, but the manifest does not offer it to this role


def test_validation_error_lists_fields_and_schema_version(agent_client, catalog):
    _, body = run_and_call(agent_client, [call("c1", "orders.echo", {"order_id": "x", "email": "nope"})])
    error = body["results"][0]["error"]
    assert error["schema_version"] == "1.0.0"
    assert {f["field"] for f in error["fields"]} == {"order_id", "email"}
    assert ToolCall.objects.get(call_id="c1").status == CallStatus.INVALID


def test_unexpected_exception_reaches_log_not_agent(agent_client, catalog, caplog):
    with caplog.at_level(logging.ERROR):
        _, body = run_and_call(agent_client, [call("c1", "orders.boom")])
    assert "hunter2" not in str(body) and "Traceback" not in str(body)
    assert "hunter2" in caplog.text


def test_retired_since_pin_still_stops_the_call(agent_client, catalog):
    run = start_run(agent_client)
    SkillVersion.objects.filter(pk=catalog["read"].pk).update(status=VersionStatus.RETIRED)
    result = post_calls(agent_client, run["run_id"], [call("c1", "orders.echo", {"order_id": "ord_1"})]).json()
    assert result["results"][0]["error"]["code"] == "retired"


def test_grant_revoked_since_pin_still_stops_the_call(agent_client, catalog, acme):
    from django.utils import timezone

    from policies.models import Grant

    run = start_run(agent_client)
    Grant.objects.filter(tenant=acme, skill_pattern="orders.*").update(revoked_at=timezone.now())
    result = post_calls(agent_client, run["run_id"], [call("c1", "orders.echo", {"order_id": "ord_1"})]).json()
    assert result["results"][0]["error"]["code"] == "no_grant"


def test_deprecated_skill_warns_with_replacement(agent_client, acme):
    new = make_skill("orders.get_v2", adapter="python:test.echo", publish=False)
    make_skill("orders.get_v1", adapter="python:test.echo", status=VersionStatus.DEPRECATED, replacement=new.skill)
    grant(acme, "orders.*")
    _, body = run_and_call(agent_client, [call("c1", "orders.get_v1")])
    assert body["results"][0]["status"] == "ok"
    assert "orders.get_v2" in body["results"][0]["warnings"][0]


@pytest.mark.parametrize(
    "effect_key,tainted,expected",
    [
        ("read", False, "ok"),
        ("draft", False, "ok"),
        ("write", False, "ok"),
        ("write", True, "approval_required"),
        ("external", False, "approval_required"),
        ("destructive", False, "approval_required"),
    ],
)
def test_default_verdict_by_effect(agent_client, catalog, effect_key, tainted, expected):
    name = catalog[effect_key].skill.name
    arguments = {"order_id": "ord_1"} if effect_key == "read" else {}
    extra = {"taint": "read a web page"} if tainted else {}
    _, body = run_and_call(agent_client, [call("c1", name, arguments, **extra)])
    assert body["results"][0]["status"] == expected


def test_deny_rule_returns_authorization_error_with_reason(agent_client, catalog, acme):
    published_policy(
        [rule("no-writes", "deny", 'skill.effect == "write"', "writes are frozen today")], scope="tenant", tenant=acme
    )
    _, body = run_and_call(agent_client, [call("c1", "orders.write_echo")])
    error = body["results"][0]["error"]
    assert (error["class"], error["message"]) == ("authorization", "writes are frozen today")
    stored = ToolCall.objects.get(call_id="c1")
    assert stored.status == CallStatus.DENIED
    assert stored.decision["scope"] == "tenant" and stored.decision["rule_id"].endswith("/no-writes")
    assert stored.decision["policy_version"].endswith("@v1")


def test_confirm_pauses_run_opens_approval_and_seals_raw_arguments(agent_client, catalog):
    from approvals.models import ApprovalRequest
    from lib.sealing import unseal

    secret = "sk-live-abcdefghijklmnopqrstu"
    run, body = run_and_call(
        agent_client, [call("c1", "support.external_echo", {"to": "x@y.example", "token": secret})]
    )
    result = body["results"][0]
    approval = ApprovalRequest.objects.get()
    assert result["status"] == "approval_required" and result["approval_id"] == approval.pk
    assert result["proposed_action"]["skill"] == "support.external_echo"
    assert result["expires_at"] == approval.expires_at.isoformat()
    assert body["run_status"] == "paused" and Run.objects.get(pk=run["run_id"]).status == "paused"
    stored = ToolCall.objects.get(call_id="c1")
    assert unseal(stored.sealed_arguments)["token"] == "sk-live-abcdefghijklmnopqrstu"
    assert "sk-live-abcdefghijklmnopqrstu" not in str(stored.arguments)
    assert result["proposed_action"]["arguments"]["token"] == secret  # the agent sees exactly what it proposed
    assert secret not in str(stored.result)  # storage keeps the redacted form only


def test_cross_tenant_run_id_is_404(agent_client, outsider_agent_client, catalog):
    run = start_run(agent_client)
    assert outsider_agent_client.get(reverse("runs_api:run_detail", args=[run["run_id"]])).status_code == 404
    assert post_calls(outsider_agent_client, run["run_id"], [call("c1", "orders.echo")]).status_code == 404


def test_get_run_lists_calls(agent_client, catalog):
    run, _ = run_and_call(agent_client, [call("c1", "orders.echo", {"order_id": "ord_1"}), call("c2", "orders.nope")])
    body = agent_client.get(reverse("runs_api:run_detail", args=[run["run_id"]])).json()
    assert [(c["call_id"], c["status"], c["error_class"]) for c in body["calls"]] == [
        ("c1", "succeeded", ""),
        ("c2", "invalid", "not_found"),
    ]


def test_wrong_method_and_missing_key(client, agent_client, catalog):
    assert agent_client.get(reverse("runs_api:run_create")).status_code == 405
    assert client.post(reverse("runs_api:run_create"), {}, content_type="application/json").status_code == 401


def test_get_run_query_count_is_constant(agent_client, catalog, django_assert_max_num_queries):
    run, _ = run_and_call(agent_client, [call(f"c{i}", "orders.echo", {"order_id": "ord_1"}) for i in range(8)])
    with django_assert_max_num_queries(4):  # auth, run (+snapshot, agent, tenant), calls
        body = agent_client.get(reverse("runs_api:run_detail", args=[run["run_id"]])).json()
    assert len(body["calls"]) == 8
