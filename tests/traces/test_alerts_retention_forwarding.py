import http.server
import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tests.traces.conftest import make_run
from traces import tasks
from traces.models import Alert, AlertKind, AlertRule, Span, Trace
from traces.recording import ensure_trace, record_span
from traces.services import evaluate_alert_rules, forward_spans, purge_expired_traces, update_trace_settings

pytestmark = pytest.mark.django_db


def calls(run, skill, n, *, errors=0, same_args=False, error_class="timeout", start=None):
    start = start or timezone.now() - timedelta(minutes=5)
    for i in range(n):
        record_span(
            run=run,
            kind="tool_call",
            name=skill,
            skill_name=skill,
            started_at=start + timedelta(seconds=i),
            ended_at=start + timedelta(seconds=i, milliseconds=20),
            verdict="allow",
            error_class=error_class if i < errors else "",
            attributes={"airlock.arguments.sha256": "a" * 64 if same_args else f"{i:064d}"},
        )


def test_error_rate_rule_fires_once_per_window_and_emails_the_team(
    run, owned_skill, owner_team, django_capture_on_commit_callbacks
):
    owner_team.email = "billing-team@example.com"
    owner_team.save()
    AlertRule.objects.create(
        skill_name=owned_skill.name, kind=AlertKind.ERROR_RATE, threshold=0.3, window=timedelta(hours=1), min_calls=5
    )
    calls(run, owned_skill.name, 10, errors=4)
    with django_capture_on_commit_callbacks(execute=True):
        fired = evaluate_alert_rules()
    assert len(fired) == 1 and "4 of 10 calls failed" in fired[0].message
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["billing-team@example.com"]
    with django_capture_on_commit_callbacks(execute=True):
        assert evaluate_alert_rules() == []  # same window: nothing new, no second email
    assert Alert.objects.count() == 1 and len(mail.outbox) == 1
    assert Alert.objects.get().emailed_at is not None


def test_error_rate_below_threshold_or_too_few_calls_is_quiet(run, owned_skill):
    AlertRule.objects.create(
        skill_name=owned_skill.name, kind=AlertKind.ERROR_RATE, threshold=0.5, window=timedelta(hours=1), min_calls=5
    )
    calls(run, owned_skill.name, 10, errors=4)
    AlertRule.objects.create(
        skill_name="crm.lookup", kind=AlertKind.ERROR_RATE, threshold=0.1, window=timedelta(hours=1), min_calls=5
    )
    calls(run, "crm.lookup", 3, errors=3)
    assert evaluate_alert_rules() == []


def test_calls_outside_the_window_do_not_count(run, owned_skill):
    AlertRule.objects.create(
        skill_name=owned_skill.name, kind=AlertKind.ERROR_RATE, threshold=0.1, window=timedelta(minutes=15), min_calls=1
    )
    calls(run, owned_skill.name, 5, errors=5, start=timezone.now() - timedelta(hours=2))
    assert evaluate_alert_rules() == []


def test_identical_calls_in_one_run_rule(run, owned_skill, acme, agent, snapshot):
    AlertRule.objects.create(
        skill_name=owned_skill.name, kind=AlertKind.REPEATED_CALLS, threshold=4, window=timedelta(hours=1)
    )
    calls(run, owned_skill.name, 3, same_args=True)
    other = make_run(tenant=acme, agent=agent, snapshot=snapshot)
    calls(other, owned_skill.name, 3, same_args=True)  # 3 + 3 across two runs: not 4 in one
    assert evaluate_alert_rules() == []
    calls(run, owned_skill.name, 1, same_args=True)
    fired = evaluate_alert_rules()
    assert len(fired) == 1 and fired[0].value == 4


def test_contract_violation_rule(run, owned_skill):
    AlertRule.objects.create(
        skill_name=owned_skill.name, kind=AlertKind.CONTRACT_VIOLATIONS, threshold=2, window=timedelta(hours=1)
    )
    calls(run, owned_skill.name, 5, errors=1, error_class="contract_violation")
    assert evaluate_alert_rules() == []
    calls(run, owned_skill.name, 1, errors=1, error_class="contract_violation")
    assert len(evaluate_alert_rules()) == 1


def test_beat_task_evaluates(run, owned_skill):
    AlertRule.objects.create(
        skill_name=owned_skill.name, kind=AlertKind.ERROR_RATE, threshold=0.1, window=timedelta(hours=1), min_calls=1
    )
    calls(run, owned_skill.name, 2, errors=2)
    assert tasks.evaluate_alerts() == 1
    assert tasks.evaluate_alerts() == 0


def test_retention_deletes_old_traces_per_tenant_in_batches(acme, globex, agent, snapshot):
    from console.services import create_agent

    acme.trace_retention = timedelta(days=7)
    acme.save()
    gx_agent, _ = create_agent(tenant=globex, name="gx", role="support")
    old = ensure_trace(make_run(tenant=acme, agent=agent, snapshot=snapshot))
    fresh = ensure_trace(make_run(tenant=acme, agent=agent, snapshot=snapshot))
    globex_old = ensure_trace(make_run(tenant=globex, agent=gx_agent, snapshot=snapshot))  # 30-day default
    for trace, age in ((old, 8), (fresh, 1), (globex_old, 8)):
        Trace.objects.filter(pk=trace.pk).update(started_at=timezone.now() - timedelta(days=age))
        Span.objects.bulk_create(
            [
                Span(trace=trace, span_id=f"{i + 1:016x}", kind="other", name="s", started_at=timezone.now())
                for i in range(25)
            ]
        )
    deleted = purge_expired_traces(batch_size=10)
    assert deleted == 1
    assert set(Trace.objects.values_list("pk", flat=True)) == {fresh.pk, globex_old.pk}
    assert Span.objects.count() == 50
    assert purge_expired_traces() == 0  # running again does nothing


def test_retention_stops_after_its_batch_budget_and_continues_next_time(acme, agent, snapshot):
    trace = ensure_trace(make_run(tenant=acme, agent=agent, snapshot=snapshot))
    Trace.objects.filter(pk=trace.pk).update(started_at=timezone.now() - timedelta(days=90))
    Span.objects.bulk_create(
        [
            Span(trace=trace, span_id=f"{i + 1:016x}", kind="other", name="s", started_at=timezone.now())
            for i in range(30)
        ]
    )
    assert purge_expired_traces(batch_size=10, max_batches=2) == 0
    assert Span.objects.count() == 10
    assert purge_expired_traces(batch_size=10, max_batches=5) == 1
    assert not Trace.objects.exists()


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: list = []
    status = 200

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    _Receiver.received, _Receiver.status = [], 200
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, _Receiver
    server.shutdown()
    server.server_close()


def test_forwarding_sends_redacted_spans_as_otlp_protobuf_once(run, acme, receiver):
    server, handler = receiver
    update_trace_settings(
        tenant=acme,
        forward_enabled=True,
        forward_endpoint=f"http://127.0.0.1:{server.server_port}/v1/traces",
        forward_headers={"Authorization": "Bearer collector-token-abcdef"},
    )
    record_span(
        run=run,
        kind="tool_call",
        name="billing.create_refund",
        started_at=timezone.now(),
        verdict="deny",
        attributes={"note": "sk-proj-abcdefghijklmnop123456"},
    )
    assert forward_spans(tenant_id=acme.pk) == 1
    headers, body = handler.received[0]
    assert headers["Authorization"] == "Bearer collector-token-abcdef"
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    attrs = {kv.key: kv.value.string_value for kv in span.attributes}
    assert span.trace_id.hex() == run.id.hex and attrs["gen_ai.security.decision.type"] == "deny"
    assert b"sk-proj-abcdefghijklmnop123456" not in body
    assert forward_spans(tenant_id=acme.pk) == 0  # cursor moved: nothing sent twice
    assert len(handler.received) == 1


def test_forwarding_failure_keeps_the_cursor(run, acme, receiver):
    import httpx

    server, handler = receiver
    handler.status = 503
    update_trace_settings(
        tenant=acme,
        forward_enabled=True,
        forward_headers=None,
        forward_endpoint=f"http://127.0.0.1:{server.server_port}/v1/traces",
    )
    record_span(run=run, kind="policy", name="p", started_at=timezone.now())
    with pytest.raises(httpx.HTTPStatusError):
        forward_spans(tenant_id=acme.pk)
    handler.status = 200
    assert forward_spans(tenant_id=acme.pk) == 1
    assert len(handler.received) == 2
