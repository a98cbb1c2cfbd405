import gzip
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from traces.models import Span, Trace
from traces.recording import ensure_trace

pytestmark = pytest.mark.django_db
URL = "traces_api:span_batch"
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def span(i: int, **extra) -> dict:
    return {
        "trace_id": "ab" * 16,
        "span_id": f"{i + 1:016x}",
        "kind": "model_turn",
        "name": f"turn {i}",
        "started_at": (T0 + timedelta(milliseconds=i)).isoformat(),
        "ended_at": (T0 + timedelta(milliseconds=i + 5)).isoformat(),
        **extra,
    }


def post(client, spans, **headers):
    return client.post(reverse(URL), data=json.dumps({"spans": spans}), content_type="application/json", **headers)


def test_batch_is_stored_and_a_resend_stores_nothing_twice(agent_client, agent):
    batch = [span(i) for i in range(50)]
    first = post(agent_client, batch)
    assert first.status_code == 202 and first.json()["stored"] == 50
    again = post(agent_client, batch)
    assert again.json() == {"received": 50, "stored": 0, "duplicates": 50, "traces": ["ab" * 16]}
    trace = Trace.objects.get()
    assert Span.objects.count() == 50 and trace.span_count == 50 and trace.agent == agent
    assert trace.started_at == T0 and trace.ended_at == T0 + timedelta(milliseconds=54)


def test_spans_sent_with_a_run_id_land_on_the_runs_trace(agent_client, run):
    trace = ensure_trace(run)
    response = post(
        agent_client,
        [{"run_id": str(run.id), "kind": "model_turn", "name": "plan", "started_at": "2026-05-01T12:00:00Z"}],
    )
    assert response.status_code == 202
    assert Span.objects.get().trace_id == trace.pk
    # no span id: derived from content, so a resend is still a duplicate
    assert (
        post(
            agent_client,
            [{"run_id": str(run.id), "kind": "model_turn", "name": "plan", "started_at": "2026-05-01T12:00:00Z"}],
        ).json()["stored"]
        == 0
    )


def test_a_malformed_span_refuses_the_whole_batch_with_its_position(agent_client):
    batch = [span(0), span(1), {**span(2), "span_id": "xyz"}]
    response = post(agent_client, batch)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_span_id"
    assert "spans[2].span_id" in response.json()["error"]["message"]
    assert Span.objects.count() == 0 and Trace.objects.count() == 0


@pytest.mark.parametrize(
    ("mutation", "code"),
    [
        ({"kind": "banana"}, "bad_kind"),
        ({"started_at": "yesterday"}, "bad_time"),
        ({"started_at": "2026-05-01T12:00:00"}, "bad_time"),
        ({"ended_at": "2020-01-01T00:00:00Z"}, "ends_before_start"),
        ({"name": ""}, "missing_name"),
        ({"surprise": 1}, "unknown_field"),
        ({"attributes": ["x"]}, "bad_attributes"),
    ],
)
def test_each_malformed_field_has_a_precise_code(agent_client, mutation, code):
    response = post(agent_client, [span(0), {**span(1), **mutation}])
    assert response.status_code == 400 and response.json()["error"]["code"] == code
    assert Span.objects.count() == 0


def test_not_json_and_wrong_shape(agent_client):
    bad = agent_client.post(reverse(URL), data="{nope", content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_json"
    shape = agent_client.post(reverse(URL), data="[]", content_type="application/json")
    assert shape.json()["error"]["code"] == "bad_batch"


def test_oversized_requests_are_refused_whole(agent_client, settings):
    settings.TRACES_INGEST_MAX_SPANS = 10
    response = post(agent_client, [span(i) for i in range(11)])
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_many_spans"
    settings.TRACES_INGEST_MAX_BODY_BYTES = 1000
    response = post(agent_client, [span(i) for i in range(10)])
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"
    settings.TRACES_INGEST_MAX_BODY_BYTES = 10**6
    settings.TRACES_INGEST_MAX_ATTRIBUTE_BYTES = 100
    response = post(agent_client, [span(0, attributes={"blob": "x" * 200})])
    assert response.status_code == 413 and response.json()["error"]["code"] == "attributes_too_large"
    assert Span.objects.count() == 0


def test_gzip_bodies_and_gzip_bombs(agent_client, settings):
    body = gzip.compress(json.dumps({"spans": [span(0)]}).encode())
    ok = agent_client.post(reverse(URL), data=body, content_type="application/json", HTTP_CONTENT_ENCODING="gzip")
    assert ok.status_code == 202 and Span.objects.count() == 1
    settings.TRACES_INGEST_MAX_DECODED_BYTES = 10_000
    bomb = gzip.compress(json.dumps({"spans": [span(1, attributes={"pad": " " * 50_000})]}).encode())
    assert len(bomb) < 2_000
    refused = agent_client.post(reverse(URL), data=bomb, content_type="application/json", HTTP_CONTENT_ENCODING="gzip")
    assert refused.status_code == 413 and Span.objects.count() == 1


def test_over_the_tenant_rate_answers_429_with_retry_after(agent_client, settings):
    settings.TRACES_INGEST_SPANS_PER_MINUTE = 5
    assert post(agent_client, [span(i) for i in range(5)]).status_code == 202
    response = post(agent_client, [span(9)])
    assert response.status_code == 429 and 1 <= int(response["Retry-After"]) <= 60
    assert response.json()["error"]["class"] == "rate_limited"


def test_at_capacity_answers_503_with_retry_after(agent_client, settings):
    settings.TRACES_INGEST_MAX_INFLIGHT = 0
    response = post(agent_client, [span(0)])
    assert response.status_code == 503 and response["Retry-After"] == "2"
    assert Span.objects.count() == 0


def test_secrets_in_ingested_attributes_are_masked(agent_client):
    post(agent_client, [span(0, attributes={"gen_ai.input.messages": "my key is sk-proj-abcdefghijklmnop123456"})])
    assert "sk-proj-abcdefghijklmnop123456" not in json.dumps(Span.objects.get().attributes)


def test_only_agents_may_send_spans(client, viewer, outsider_agent_client):
    assert client.post(reverse(URL), data="{}", content_type="application/json").status_code == 401
    client.force_login(viewer)
    assert (
        client.post(reverse(URL), data=json.dumps({"spans": [span(0)]}), content_type="application/json").status_code
        == 403
    )
    assert client.get(reverse(URL)).status_code in (403, 405)


def test_an_agent_cannot_write_into_another_tenants_or_agents_trace(agent_client, outsider_agent_client, run):
    response = post(outsider_agent_client, [{"run_id": str(run.id), "name": "x", "started_at": T0.isoformat()}])
    assert response.status_code == 202  # a trace of its own tenant with that id, not acme's
    assert Trace.objects.get(tenant__slug="globex").run_id is None
    from console.services import create_agent

    _, other_key = create_agent(tenant=run.tenant, name="other-bot", role="support")
    agent_client.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    refused = post(agent_client, [{"run_id": str(run.id), "name": "x", "started_at": T0.isoformat()}])
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "trace_of_another_agent"
