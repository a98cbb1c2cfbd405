"""Circuit breakers: open after failures in a window, fail fast, half-open with one probe, close."""

import pytest
from django.core import mail

from reliability.models import BreakerTransition
from runs.plane import breakers
from tests.reliability.conftest import bind, gate, publish, skill
from traces.models import Span

pytestmark = pytest.mark.django_db


def read(agent, call_id, run=None):
    run, results = gate(agent, [{"call_id": call_id, "name": "catalog.get_item", "arguments": {}}], run=run)
    return run, results[0]


def test_breaker_opens_fails_fast_half_opens_and_closes(world, flaky, clock):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=1)
    publish()
    flaky.default("/item", 503)
    agent = world["agent"]
    run = None
    for i in range(3):
        run, result = read(agent, f"c{i}", run)
        assert result["error"]["class"] == "transient"
    assert flaky.hits["/item"] == 3
    domain = breakers.domain_for(flaky.url + "/item")
    assert breakers.state_of(domain) == "open"

    _, fast = read(agent, "c3", run)
    assert fast["error"]["class"] == "unavailable" and fast["error"]["code"] == "circuit_open"
    assert fast["error"]["retry_after"] >= 1
    assert flaky.hits["/item"] == 3  # failed fast: the service was not called
    span = Span.objects.filter(trace__run=run, kind="execution_attempt").order_by("-started_at").first()
    assert span.attributes["airlock.breaker.state"] == "open"
    call_span = Span.objects.filter(trace__run=run, kind="tool_call").order_by("-started_at").first()
    assert call_span.attributes["airlock.breaker.state"] == "open"

    clock.advance(breakers.config()["open_s"])
    assert breakers.state_of(domain) == "half_open"
    flaky.default("/item", {"item": "back"})
    _, probe = read(agent, "c4", run)
    assert probe["status"] == "ok" and flaky.hits["/item"] == 4
    assert breakers.state_of(domain) == "closed"
    assert list(BreakerTransition.objects.order_by("at").values_list("from_state", "to_state")) == [
        ("closed", "open"),
        ("half_open", "closed"),
    ]
    assert [m.subject for m in mail.outbox] == [
        f"[Airlock] circuit open for {domain}",
        f"[Airlock] circuit closed for {domain}",
    ]
    assert all(m.to == ["owners@example.com"] for m in mail.outbox)


def test_failed_probe_opens_again_and_only_one_probe_is_let_through(world, flaky, clock):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=1)
    publish()
    domain = breakers.domain_for(flaky.url + "/item")
    failing = breakers.Admission("closed", probe=False)
    for _ in range(3):
        breakers.record_failure(domain, failing, reason="test")
    clock.advance(breakers.config()["open_s"])
    first = breakers.admit(domain)
    assert first.probe
    with pytest.raises(Exception) as second:
        breakers.admit(domain)
    assert second.value.code == "circuit_half_open"
    assert breakers.record_failure(domain, first, reason="still down")[0].to_state == "open"
    assert breakers.state_of(domain) == "open"


def test_client_errors_do_not_open_the_breaker(world, flaky):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=1)
    publish()
    flaky.default("/item", 404)
    run = None
    for i in range(5):
        run, result = read(world["agent"], f"c{i}", run)
        assert result["error"]["class"] == "not_found"
    assert breakers.state_of(breakers.domain_for(flaky.url)) == "closed"


def test_failures_are_tenant_specific_when_the_skill_uses_tenant_credentials(world, flaky, globex):
    from console.services import create_agent
    from reliability.services import save_credential
    from tests.runs.factories import grant

    skill("helpdesk.get_ticket", f"{flaky.url}/ticket", max_attempts=1, credential="helpdesk_token")
    publish()
    save_credential(tenant=world["acme"], name="helpdesk_token", value="acme-secret")
    save_credential(tenant=globex, name="helpdesk_token", value="globex-secret")
    for tenant in (world["acme"], globex):
        bind(tenant, "helpdesk_token", "helpdesk.get_ticket", flaky.url)
    grant(globex, "*")
    globex_agent, _ = create_agent(tenant=globex, name="g", role="support")
    flaky.default(
        "/ticket", lambda handler: (503, {}) if "acme" in handler.headers["Authorization"] else (200, {"ticket": 1})
    )
    run = None
    for i in range(4):
        run, results = gate(
            world["agent"], [{"call_id": f"a{i}", "name": "helpdesk.get_ticket", "arguments": {}}], run=run
        )
    assert results[0]["error"]["code"] == "circuit_open"
    _, other = gate(globex_agent, [{"call_id": "g1", "name": "helpdesk.get_ticket", "arguments": {}}])
    assert other[0]["status"] == "ok"
    assert BreakerTransition.objects.get().tenant == world["acme"]
