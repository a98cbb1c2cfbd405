"""find_tools, describe_tool and run-pinned tool lists, tried by an agent fishing for what it may not call.

What must hold: discovery inside a run answers only with skills the run may call now (granted, offered
to its tenant and role, not retired); the meta tools go through the gate like any call (validated,
judged by policy, recorded with spans); a run's tool list stays the same when a new snapshot is
published mid-run; a skill retired mid-run drops out, and calling it names its replacement.
"""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from policies import services as policy_services
from policies.models import Grant
from registry import services as registry_services
from runs.models import ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule
from traces.models import Span

REFUNDS = "Refund a customer's order to the original payment method."


@pytest.fixture
def catalog(acme, globex):
    make_skill("billing.refund_order", adapter="python:test.echo", publish=False)
    make_skill("billing.issue_credit", effect="write", adapter="python:test.echo", publish=False)
    make_skill("billing.read_invoice", adapter="python:test.echo", data="confidential", publish=False)
    make_skill("hr.refund_expenses", adapter="python:test.echo", publish=False)  # never granted to acme
    make_skill("billing.globex_refunds", adapter="python:test.echo", tenants=["globex"], publish=False)
    make_skill("billing.old_refunds", adapter="python:test.echo", status="retired", publish=False)
    grant(acme, "billing.*")
    grant(globex, "billing.*")
    grant(globex, "hr.*")
    make_skill("billing.void_refund", adapter="python:test.echo")  # publishes the snapshot


def _results(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _find(agent_client, run_id, call_id="f-1", **arguments) -> dict:
    return _results(post_calls(agent_client, run_id, [call(call_id, "find_tools", arguments)]))[0]


def _names(result: dict) -> set[str]:
    assert result["status"] == "ok", result
    return {hit["name"] for hit in result["content"]["results"]}


def _tools(agent_client, **params) -> dict:
    response = agent_client.get(reverse("runs_api:tools"), params)
    assert response.status_code == 200, response.content
    return response.json()


def test_find_tools_never_names_a_skill_the_run_may_not_call(catalog, agent_client):
    run_id = start_run(agent_client)["run_id"]
    found = _names(_find(agent_client, run_id, query="refund", limit=20))
    assert found == {"billing.refund_order", "billing.void_refund"} | (found & {"billing.issue_credit"})
    # Not granted to acme, offered to globex only, retired: none of them, whatever the query says.
    for query in ("refund expenses", "globex refunds", "old refunds", "hr", "billing.old_refunds"):
        names = _names(_find(agent_client, run_id, call_id=f"q-{query}", query=query, limit=20))
        assert not names & {"hr.refund_expenses", "billing.globex_refunds", "billing.old_refunds"}, query


def test_find_tools_filters_narrow_and_summaries_are_short(catalog, agent_client):
    run_id = start_run(agent_client)["run_id"]
    reads = _find(agent_client, run_id, query="billing", effect=["read"], limit=20)
    assert _names(reads) == {"billing.refund_order", "billing.read_invoice", "billing.void_refund"}
    public_only = _find(agent_client, run_id, call_id="f-2", query="billing", data_class=["confidential"], limit=20)
    assert _names(public_only) == {"billing.read_invoice"}
    hit = reads["content"]["results"][0]
    assert set(hit) == {"name", "tool_name", "version", "summary", "effect", "data_classification", "approval"}
    assert hit["tool_name"] == hit["name"].replace(".", "__") and len(hit["summary"]) <= 200


def test_describe_tool_gives_the_definition_and_refuses_what_the_run_may_not_call_alike(catalog, agent_client):
    run_id = start_run(agent_client)["run_id"]
    results = _results(
        post_calls(
            agent_client,
            run_id,
            [
                call("d-1", "describe_tool", {"name": "billing__refund_order", "format": "anthropic"}),
                call("d-2", "describe_tool", {"name": "billing.refund_order", "format": "mcp"}),
                call("d-3", "describe_tool", {"name": "hr.refund_expenses"}),  # another team's, ungranted
                call("d-4", "describe_tool", {"name": "billing.globex_refunds"}),  # another tenant's
                call("d-5", "describe_tool", {"name": "billing.old_refunds"}),  # retired
                call("d-6", "describe_tool", {"name": "billing.no_such_thing"}),
            ],
        )
    )
    anthropic, mcp = results[0]["content"], results[1]["content"]
    assert anthropic["definition"]["name"] == "billing__refund_order" and "input_schema" in anthropic["definition"]
    assert mcp["definition"]["name"] == "billing.refund_order" and mcp["definition"]["annotations"]["readOnlyHint"]
    refusals = [{**r["error"], "message": r["error"]["message"].split(" you may")[1]} for r in results[2:]]
    assert all(r == refusals[0] for r in refusals)  # nothing tells ungranted, foreign and retired from unknown
    assert refusals[0]["class"] == "not_found" and refusals[0]["code"] == "unknown_tool"


def test_meta_tools_are_validated_recorded_and_traced_like_any_call(catalog, agent_client):
    run_id = start_run(agent_client)["run_id"]
    results = _results(
        post_calls(
            agent_client,
            run_id,
            [
                call("v-1", "find_tools", {}),
                call("v-2", "find_tools", {"query": "refund", "limit": 500}),
                call("v-3", "find_tools", {"query": "refund", "effect": ["sideways"]}),
                call("v-4", "describe_tool", {"name": "billing.refund_order", "format": "gemini"}),
                call("ok-1", "find_tools", {"query": "refund"}),
            ],
        )
    )
    assert [r["status"] for r in results] == ["error"] * 4 + ["ok"]
    assert {r["error"]["class"] for r in results[:4]} == {"validation"}
    assert results[1]["error"]["fields"][0]["field"] == "limit"
    recorded = {c.call_id: c for c in ToolCall.objects.filter(run_id=run_id)}
    assert recorded["v-1"].status == "invalid" and recorded["ok-1"].status == "succeeded"
    assert recorded["ok-1"].verdict == "allow" and recorded["ok-1"].effect == "read"
    assert Span.objects.filter(call=recorded["ok-1"]).exists()


def test_a_policy_can_deny_find_tools(catalog, agent_client):
    published_policy([rule("no-search", "deny", 'skill.name == "find_tools"', reason="Use the fixed tool list.")])
    run_id = start_run(agent_client)["run_id"]
    result = _find(agent_client, run_id, query="refund")
    assert result["status"] == "error" and result["error"]["code"] == "denied_by_policy"
    assert ToolCall.objects.get(run_id=run_id, call_id="f-1").status == "denied"


def test_a_runs_tool_list_and_find_tools_hold_when_a_new_snapshot_is_published(catalog, acme, agent_client):
    run_id = start_run(agent_client)["run_id"]
    before = _tools(agent_client, run_id=run_id)
    make_skill("billing.refund_shipping", adapter="python:test.echo")  # granted by billing.*, new snapshot
    after = _tools(agent_client, run_id=run_id)
    assert after["tools"] == before["tools"] and after["snapshot"] == before["snapshot"]
    latest = _tools(agent_client)
    assert latest["snapshot"] > before["snapshot"]
    assert "billing__refund_shipping" in {tool["name"] for tool in latest["tools"]}
    assert "billing.refund_shipping" not in _names(_find(agent_client, run_id, query="refund shipping", limit=20))
    next_run = start_run(agent_client)["run_id"]
    assert "billing.refund_shipping" in _names(_find(agent_client, next_run, query="refund shipping", limit=20))


def test_a_skill_retired_mid_run_leaves_the_list_and_its_call_names_the_replacement(owner, catalog, agent_client):
    run_id = start_run(agent_client)["run_id"]
    assert "billing__refund_order" in {tool["name"] for tool in _tools(agent_client, run_id=run_id)["tools"]}
    old = registry_services.Skill.objects.get(name="billing.refund_order")
    replacement = registry_services.Skill.objects.get(name="billing.void_refund")
    registry_services.retire_skill(skill=old, user=owner, replacement=replacement)
    listed = {tool["name"] for tool in _tools(agent_client, run_id=run_id)["tools"]}
    assert "billing__refund_order" not in listed and "billing__void_refund" in listed
    assert "billing.refund_order" not in _names(_find(agent_client, run_id, query="refund order", limit=20))
    result = _results(post_calls(agent_client, run_id, [call("r-1", "billing.refund_order", {})]))[0]
    assert result["error"]["class"] == "not_found" and result["error"]["code"] == "retired"
    assert result["error"]["replacement"] == "billing.void_refund"
    assert "use billing.void_refund instead" in result["error"]["message"]


def test_progressive_disclosure_offers_only_the_meta_tools_in_each_format(catalog, agent_client):
    run_id = start_run(agent_client)["run_id"]
    for fmt, schema_key in (("openai", "parameters"), ("anthropic", "input_schema"), ("mcp", "inputSchema")):
        tools = _tools(agent_client, run_id=run_id, format=fmt, disclosure="progressive")["tools"]
        names = [tool["name"] for tool in tools]
        assert names[:3] == ["find_tools", "describe_tool", "describe_result"] and names[3] in (
            "human__ask",
            "human.ask",
        )
        assert len(names) == 4 and tools[0][schema_key]["required"] == ["query"]
    both = _tools(agent_client, run_id=run_id, disclosure="both")["tools"]
    assert [tool["name"] for tool in both[:3]] == ["find_tools", "describe_tool", "describe_result"] and len(both) > 4
    bad = agent_client.get(reverse("runs_api:tools"), {"disclosure": "some"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_disclosure"


def test_another_agents_run_reads_like_a_missing_one(catalog, acme, agent_client, outsider_agent_client):
    run_id = start_run(agent_client)["run_id"]
    theirs = outsider_agent_client.get(reverse("runs_api:tools"), {"run_id": run_id})
    missing = outsider_agent_client.get(reverse("runs_api:tools"), {"run_id": str(uuid.uuid4())})
    assert theirs.status_code == missing.status_code == 404 and theirs.json() == missing.json()
    malformed = agent_client.get(reverse("runs_api:tools"), {"run_id": "1 OR 1=1"})
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "invalid_run_id"


def test_a_revoked_grant_leaves_the_runs_list_at_once(catalog, acme, agent_client, tenant_admin):
    run_id = start_run(agent_client)["run_id"]
    assert _tools(agent_client, run_id=run_id)["tools"]
    for revoked in Grant.objects.filter(tenant=acme):
        policy_services.revoke_grant(grant=revoked, revoked_by=tenant_admin)
    assert _tools(agent_client, run_id=run_id)["tools"] == []
    assert _names(_find(agent_client, run_id, query="refund", limit=20)) == set()


def test_an_owner_names_the_replacement_when_retiring_over_the_api(owner, catalog, client):
    client.force_login(owner)
    url = reverse("registry_api:skill-retire", args=["billing.refund_order"])
    unknown = client.post(url, {"replacement": "billing.nothing"}, content_type="application/json")
    assert unknown.status_code == 400 and unknown.json()["error"]["errors"][0]["code"] == "unknown_replacement"
    itself = client.post(url, {"replacement": "billing.refund_order"}, content_type="application/json")
    assert itself.status_code == 400
    assert registry_services.Skill.objects.get(name="billing.refund_order").versions.get().status == "active"
    retired = client.post(url, {"replacement": "billing.void_refund"}, content_type="application/json")
    assert retired.status_code == 200 and retired.json()["status"] == "retired"
