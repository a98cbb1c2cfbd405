"""Documented errors (issue 38 part 4), tried as the model meets them and as a hostile service would send
them: a declared code reaches the agent with its meaning and whether retrying helps; an undeclared one stays a
typed error and is flagged on the span, in the skill's metrics and to its owners."""

from datetime import timedelta

import pytest
from airlock_sdk.fencing import fenced_content
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from console.models import Team
from mcp_gateway.results import from_gate
from runs.models import ToolCall
from tests.conftest import login
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill
from tests.runs.test_model_context import service  # noqa: F401 - the fixture: a real loopback HTTP tool
from traces.metrics import skill_metrics
from traces.models import Span

pytestmark = pytest.mark.django_db

SHIPPED = {"code": "order_shipped", "meaning": "The order has left the warehouse; offer a return.", "retryable": False}
LOCKED = {"code": "ledger_locked", "meaning": "The ledger closes nightly; try again in ten minutes.", "retryable": True}


def _one_call(agent_client, name: str) -> tuple[str, dict]:
    run = start_run(agent_client)
    response = post_calls(agent_client, run["run_id"], [call("c1", name, {"order": "o-1"})])
    assert response.status_code == 200, response.content
    return run["run_id"], response.json()["results"][0]


def _span(run_id: str) -> Span:
    return Span.objects.get(trace__run_id=run_id, kind="tool_call")


def test_a_declared_code_reaches_the_agent_with_its_meaning_and_whether_retrying_helps(agent_client, acme, service):
    said = {"error": {"code": "order_shipped", "message": "order o-1 shipped on Monday"}}
    make_skill("shop.cancel", effect="write", errors=[SHIPPED], adapter=service.answer("/cancel", 409, said))
    grant(acme, "shop.*")
    run_id, result = _one_call(agent_client, "shop.cancel")
    fenced = result["error"]["downstream_message"]
    assert fenced_content(fenced) == "order o-1 shipped on Monday"  # the service's words, fenced as untrusted
    assert result["error"] == {
        "class": "conflict",
        "code": "downstream_conflict",
        "message": "The skill's service answered HTTP 409.",
        "downstream_message": fenced,
        "downstream_code": "order_shipped",
        "meaning": SHIPPED["meaning"],
        "retryable": False,
    }
    assert ToolCall.objects.get(run_id=run_id, call_id="c1").result["error"] == result["error"]
    span = _span(run_id)
    assert span.attributes["airlock.error.downstream_code"] == "order_shipped"
    assert "airlock.error.undeclared_code" not in span.attributes
    text = from_gate(result).content[0].text  # what an MCP client's model reads
    assert SHIPPED["meaning"] in text and "Retrying will not help." in text


def test_a_declared_code_in_a_503_body_says_retrying_can_help(agent_client, acme, service):
    make_skill("shop.ledger", errors=[LOCKED], adapter=service.answer("/ledger", 503, {"code": "ledger_locked"}))
    grant(acme, "shop.*")
    _, result = _one_call(agent_client, "shop.ledger")
    assert result["error"]["class"] == "transient"
    assert result["error"]["meaning"] == LOCKED["meaning"] and result["error"]["retryable"] is True


def test_an_undeclared_code_stays_a_typed_error_and_is_flagged_on_the_span_metrics_and_to_owners(
    agent_client, acme, service
):
    said = {"code": "ledger_locked", "message": "try later"}
    make_skill("shop.refund", effect="write", errors=[SHIPPED], adapter=service.answer("/refund", 409, said))
    Team.objects.filter(slug="support-tools").update(email="owners@example.com")
    grant(acme, "shop.*")
    run_id, result = _one_call(agent_client, "shop.refund")
    assert result["error"]["class"] == "conflict" and result["error"]["downstream_code"] == "ledger_locked"
    assert "meaning" not in result["error"] and "retryable" not in result["error"]
    assert _span(run_id).attributes["airlock.error.undeclared_code"] == "ledger_locked"
    now = timezone.now()
    figures = skill_metrics(skill_name="shop.refund", since=now - timedelta(hours=1), until=now + timedelta(minutes=1))
    assert figures.undeclared_error_codes == [("ledger_locked", 1)]
    assert any("undeclared error code ledger_locked" in m.subject for m in mail.outbox)


def test_the_owner_sees_undeclared_codes_on_the_skill_metrics_page(client, agent_client, acme, owner, service):
    make_skill("shop.refund", effect="write", errors=[SHIPPED], adapter=service.answer("/r", 409, {"code": "gone"}))
    grant(acme, "shop.*")
    _one_call(agent_client, "shop.refund")
    page = login(client, owner).get(reverse("traces:skill", args=["shop.refund"]))
    assert page.status_code == 200
    assert 'data-testid="undeclared-codes"' in page.content.decode() and "gone" in page.content.decode()


@pytest.mark.parametrize(
    "body",
    [
        {"code": "<img src=x onerror=alert(1)>", "message": "no"},  # markup is no code
        {"code": "x" * 500, "message": "no"},  # nor is a novel
        {"code": 409, "message": "no"},  # a number echoes the status
        {"error": {"code": {"nested": "order_shipped"}}},
    ],
)
def test_a_hostile_services_code_is_not_taken_nor_flagged(agent_client, acme, service, body):
    make_skill("shop.cancel", effect="write", errors=[SHIPPED], adapter=service.answer("/cancel", 409, body))
    grant(acme, "shop.*")
    run_id, result = _one_call(agent_client, "shop.cancel")
    assert result["error"]["class"] == "conflict"
    assert {"downstream_code", "meaning", "retryable"}.isdisjoint(result["error"])
    assert "airlock.error.undeclared_code" not in _span(run_id).attributes


def test_describe_tool_tells_the_model_the_declared_errors(agent_client, acme, service):
    make_skill("shop.cancel", effect="write", errors=[SHIPPED], adapter=service.answer("/cancel", 409, {}))
    make_skill("shop.lookup")
    grant(acme, "shop.*")
    run_id = start_run(agent_client)["run_id"]
    response = post_calls(
        agent_client,
        run_id,
        [call("d1", "describe_tool", {"name": "shop.cancel"}), call("d2", "describe_tool", {"name": "shop.lookup"})],
    )
    declared, undeclared = (r["content"] for r in response.json()["results"])
    assert declared["errors"] == [SHIPPED]
    assert undeclared["errors"] == []


def test_the_skill_and_review_pages_show_the_declared_errors(client, owner):
    version = make_skill("shop.cancel", effect="write", errors=[SHIPPED], status="draft", publish=False)
    make_skill("shop.lookup")
    login(client, owner)
    review = client.get(reverse("registry:review", args=["shop.cancel", version.version])).content.decode()
    assert 'data-testid="declared-errors"' in review and "order_shipped" in review and "will not help" in review
    page = client.get(reverse("registry:skill", args=["shop.lookup"])).content.decode()
    assert "No error codes declared" in page


def test_the_sdk_reads_the_declared_retryable_over_the_class(agent_client, acme, service):
    from airlock_sdk.results import result_from_dict

    make_skill("shop.cancel", effect="write", errors=[SHIPPED], adapter=service.answer("/c", 503, {"code": "x1"}))
    make_skill("shop.ledger", errors=[LOCKED], adapter=service.answer("/l", 409, {"code": "ledger_locked"}))
    grant(acme, "shop.*")
    undeclared = result_from_dict(_one_call(agent_client, "shop.cancel")[1])
    declared = result_from_dict(_one_call(agent_client, "shop.ledger")[1])
    assert undeclared.error_class == "transient" and undeclared.retryable  # by class: no declaration for x1
    assert declared.error_class == "conflict" and declared.retryable  # the owner says a retry can help
    assert declared.details["meaning"] == LOCKED["meaning"]
