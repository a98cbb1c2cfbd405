"""The gate's hot path: key-authenticated calls through the whole middleware stack and, on PostgreSQL, the
one-statement write of a batch's calls, spans and trace counters (runs/batch_write.py). Written as someone
trying to make the short cuts drop a guarantee the ordinary path keeps."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from registry.snapshots import latest_snapshot, publish_snapshot
from runs import batch_write
from runs.models import Run, ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill
from traces.models import Span, Trace

pytestmark = pytest.mark.django_db
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


@pytest.fixture
def reader(acme):
    version = make_skill("orders.echo", effect="read", adapter="python:test.echo", publish=True)
    grant(acme, "orders.*")
    publish_snapshot(reason="test")
    return version


def _run(agent_client) -> str:
    run_id = start_run(agent_client)["run_id"]
    assert post_calls(agent_client, run_id, [call("warm", "orders.echo", {"n": 0})]).status_code == 200
    return run_id


# Key-authenticated calls ------------------------------------------------------------------------------------------


def test_key_authenticated_answers_keep_the_security_headers_and_set_no_cookie(agent_client, reader):
    run_id = _run(agent_client)
    response = post_calls(agent_client, run_id, [call("c1", "orders.echo", {"n": 1})])
    assert response.status_code == 200 and response.json()["results"][0]["status"] == "ok"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert "Set-Cookie" not in response and not response.cookies


def test_a_logged_in_admins_cookie_does_not_rescue_a_bad_key(agent_client, reader, acme, django_user_model):
    """With a session cookie and a forged bearer key, the gate answers 401 and records nothing."""
    run_id = _run(agent_client)
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    attacker = APIClient()
    attacker.force_login(admin)
    attacker.credentials(HTTP_AUTHORIZATION="Bearer ak_notakey_" + "x" * 43)
    response = post_calls(attacker, run_id, [call("forged", "orders.echo", {"n": 1})])
    assert response.status_code == 401
    assert not ToolCall.objects.filter(call_id="forged").exists()


def test_another_tenants_key_is_the_same_404(agent_client, outsider_agent_client, reader):
    run_id = _run(agent_client)
    theirs = post_calls(outsider_agent_client, run_id, [call("theirs", "orders.echo", {"n": 1})])
    missing = post_calls(outsider_agent_client, "00000000-0000-4000-8000-000000000000", [call("x", "orders.echo", {})])
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()
    assert not ToolCall.objects.filter(call_id="theirs").exists()


def test_malformed_json_is_a_400_not_a_500(agent_client, reader):
    run_id = _run(agent_client)
    url = reverse("runs_api:run_calls", args=[run_id])
    response = agent_client.post(url, data='{"calls": [', content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["class"] == "validation"


def test_a_session_request_still_takes_the_whole_stack(client, reader, django_user_model):
    """Without a bearer key a logged-in session cannot start a run: CSRF and sessions apply."""
    user = django_user_model.objects.create_user("mallory", password="pw")
    client.force_login(user)
    response = client.post("/api/v1/runs", {"end_user": "u", "task": "t"}, content_type="application/json")
    assert response.status_code in (401, 403)
    assert not Run.objects.exists()


# One statement on PostgreSQL ---------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("exposed", [None, ["orders.echo", "web.search"]], ids=["gate_records_exposure", "reported"])
def test_a_single_read_call_is_two_sql_statements_on_postgresql(agent_client, reader, exposed):
    run_id = _run(agent_client)
    url = reverse("runs_api:run_calls", args=[run_id])
    batch = {"calls": [call("c1", "orders.echo", {"n": 1})]} | ({"exposed_tools": exposed} if exposed else {})
    with CaptureQueriesContext(connection) as queries:
        response = agent_client.post(url, batch, format="json")
    assert response.json()["results"][0]["status"] == "ok"
    statements = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(TRANSACTION_CONTROL)]
    assert len(statements) == 2, "\n".join(statements)
    recorded = ToolCall.objects.get(run_id=run_id, call_id="c1").decision["exposed_tools"]
    assert recorded["source"] == ("agent" if exposed else "gate") and "orders.echo" in recorded["names"]


@pytest.mark.postgres
def test_one_statement_records_what_the_ordinary_path_records(agent_client, reader):
    """Calls, their spans (linked to the right call), and the trace's counters and times."""
    run_id = _run(agent_client)
    trace = Trace.objects.get(run_id=run_id)
    before = trace.span_count
    results = post_calls(
        agent_client,
        run_id,
        [call("a", "orders.echo", {"n": 1}), call("b", "orders.nope", {}), call("c", "orders.echo", {"n": 3})],
    ).json()["results"]
    assert [r["status"] for r in results] == ["ok", "error", "ok"]
    trace.refresh_from_db()
    assert trace.span_count == before + 3 == Span.objects.filter(trace=trace).count()
    assert trace.error_count == Span.objects.filter(trace=trace).exclude(error_class="").count() >= 1
    for call_id in ("a", "b", "c"):
        stored = ToolCall.objects.get(run_id=run_id, call_id=call_id)
        span = Span.objects.get(call=stored)
        assert span.kind == "tool_call" and span.outcome == stored.status
    assert trace.ended_at == max(s.ended_at for s in Span.objects.filter(trace=trace))


@pytest.mark.postgres
def test_an_over_long_value_is_refused_not_cut(agent_and_key, reader, acme):
    """A value longer than its column fails the statement (and the caller writes the ordinary way, where
    it fails again, loudly) instead of being cut to fit."""
    agent = agent_and_key[0]
    run = Run.objects.create(tenant=acme, agent=agent, end_user="u", snapshot=latest_snapshot())
    long_call = ToolCall(run=run, call_id="x" * 201, name="orders.echo", created_at=timezone.now())
    assert batch_write.write(run=run, new_calls=[long_call], spans=[]) is False
    assert not ToolCall.objects.filter(run=run).exists()


@pytest.mark.postgres
def test_spans_that_cannot_be_stored_do_not_fail_the_batch(agent_client, reader):
    """A hostile or broken span table: the one statement fails, the ordinary path stores the call and
    answers ok, and loses only the spans (logged)."""
    run_id = _run(agent_client)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_spans() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'no spans today'; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER refuse_spans BEFORE INSERT ON traces_span FOR EACH ROW EXECUTE FUNCTION refuse_spans()"
        )
    response = post_calls(agent_client, run_id, [call("c1", "orders.echo", {"n": 1})])
    assert response.status_code == 200 and response.json()["results"][0]["status"] == "ok"
    stored = ToolCall.objects.get(run_id=run_id, call_id="c1")
    assert stored.status == "succeeded" and not Span.objects.filter(call=stored).exists()


@pytest.mark.postgres
def test_with_prepared_statements_off_the_gate_answers_the_same(agent_client, reader, settings):
    """Behind a transaction-mode pooler the operator turns them off; nothing else changes."""
    settings.AIRLOCK_DB_PREPARED_STATEMENTS = False
    run_id = _run(agent_client)
    response = post_calls(agent_client, run_id, [call("c1", "orders.echo", {"n": 1})])
    assert response.json()["results"][0]["status"] == "ok"
    assert Span.objects.filter(call__call_id="c1", call__run_id=run_id).count() == 1


AGENT_ENDPOINTS = {
    "run_detail": lambda c, run_id: c.get(reverse("runs_api:run_detail", args=[run_id])),
    "run_finish": lambda c, run_id: c.post(
        reverse("runs_api:run_finish", args=[run_id]), {"status": "completed"}, format="json"
    ),
    "tools": lambda c, run_id: c.get(reverse("runs_api:tools"), {"run_id": run_id}),
    "client_result": lambda c, run_id: c.post(
        reverse("runs_api:client_result", args=[run_id, "warm"]), {"status": "ok", "result": {}}, format="json"
    ),
}


@pytest.mark.parametrize("endpoint", list(AGENT_ENDPOINTS))
def test_every_agent_endpoint_keeps_the_security_headers_and_runs_apart(
    endpoint, agent_client, outsider_agent_client, reader
):
    """The agent's other sync endpoints keep the security headers, set no cookie, and answer another
    tenant's key as if the run did not exist."""
    send = AGENT_ENDPOINTS[endpoint]
    run_id = _run(agent_client)
    before = list(Run.objects.values_list("status", "status_reason"))
    theirs = send(outsider_agent_client, run_id)
    missing = send(outsider_agent_client, "00000000-0000-4000-8000-000000000000")
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()
    assert list(Run.objects.values_list("status", "status_reason")) == before
    own = send(agent_client, run_id)
    assert own.status_code < 500
    for response in (theirs, own):
        assert response["X-Content-Type-Options"] == "nosniff" and response["X-Frame-Options"] == "DENY"
        assert "Set-Cookie" not in response and not response.cookies
