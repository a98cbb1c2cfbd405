"""An approved fallback (issue 46): while a skill's breaker is open, its error offers the model the fallback its
owners named, only when this agent may call that skill, and the call's record and span say so."""

import pytest

from policies.models import Grant
from registry import services
from runs.plane import breakers
from tests.registry.factories import manifest
from tests.reliability.conftest import gate, publish, skill
from traces.models import Span

pytestmark = pytest.mark.django_db


def _open_breaker(agent, flaky):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=1, fallback="catalog.get_cached_item")
    skill("catalog.get_cached_item", "python:demo.search_documentation", max_attempts=1)  # another service
    publish()
    flaky.default("/item", 503)
    run = None
    for i in range(3):
        run, _ = gate(agent, [{"call_id": f"c{i}", "name": "catalog.get_item", "arguments": {}}], run=run)
    assert breakers.state_of(breakers.domain_for(flaky.url + "/item")) == "open"
    return run


def test_an_open_breaker_offers_the_approved_fallback_and_the_trace_records_it(world, flaky):
    run = _open_breaker(world["agent"], flaky)
    _, [fast] = gate(world["agent"], [{"call_id": "c3", "name": "catalog.get_item", "arguments": {}}], run=run)
    assert fast["error"]["code"] == "circuit_open" and fast["error"]["fallback"] == "catalog.get_cached_item"
    assert "call that instead" in fast["error"]["message"]
    span = Span.objects.filter(trace__run=run, kind="tool_call").order_by("-started_at").first()
    assert span.attributes["airlock.fallback.offered"] == "catalog.get_cached_item"
    switch = {"call_id": "c4", "name": "catalog.get_cached_item", "arguments": {"query": "item 7"}}
    _, [switched] = gate(world["agent"], [switch], run=run)
    assert switched["status"] == "ok", switched["error"]


def test_a_fallback_the_agent_may_not_call_is_never_offered(acme, agent, owner_team, flaky):
    Grant.objects.create(tenant=acme, agent_role=agent.role, skill_pattern="catalog.get_item")
    run = _open_breaker(agent, flaky)
    _, [fast] = gate(agent, [{"call_id": "c3", "name": "catalog.get_item", "arguments": {}}], run=run)
    assert fast["error"]["code"] == "circuit_open" and "fallback" not in fast["error"]
    assert "get_cached_item" not in fast["error"]["message"]


def test_a_fallback_must_be_another_published_skill(owner):
    for fallback, code in [("docs.search_documentation", "fallback_is_itself"), ("docs.nowhere", "unknown_fallback")]:
        with pytest.raises(services.ManifestInvalid) as refused:
            services.create_draft_version(manifest=manifest(execution__fallback=fallback), author=owner)
        assert [e["code"] for e in refused.value.errors] == [code]
