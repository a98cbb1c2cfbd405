"""PostgreSQL connections dropped: between requests (a pooled or persistent connection is health-checked and
replaced) and in the middle of a request (the batch's outcome is one transaction: nothing of it is
written, the agent is told to send the batch again, and the retry records each call once)."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.conf import settings
from django.db import close_old_connections, connection
from django.urls import reverse

from runs.adapters.python import register
from runs.models import ToolCall
from tests.runs.factories import grant, make_skill

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
KILL: dict = {"pid": None}
KILL_LOCK = threading.Lock()  # reads run on several threads: only the first one kills


def _request_backend_pid() -> int:
    """The server process behind this thread's connection: the one a request in this thread uses."""
    connection.ensure_connection()
    return connection.connection.info.backend_pid


def _terminate(pid: int) -> bool:
    """Only that one connection: other threads' connections (live servers, async helpers) live on."""
    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname="postgres", autocommit=True
    ) as admin:
        return admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]


@register("faults.lookup", effect="read")
def lookup(*, arguments, context):
    with KILL_LOCK:
        pid, KILL["pid"] = KILL["pid"], None
    if pid:
        _terminate(pid)  # the request's own connection dies while the tool runs
    return {"found": True}


@pytest.fixture
def world(acme):
    make_skill("faults.lookup", adapter="python:faults.lookup", publish=False)
    grant(acme, "faults.*")
    from registry.snapshots import publish_snapshot

    publish_snapshot(reason="faults")


@pytest.fixture
def persistent_connections():
    """Django's persistent connections, as `DATABASE_URL=...?conn_max_age=600` configures them: no pool."""
    options = connection.settings_dict["OPTIONS"]
    saved = {key: connection.settings_dict[key] for key in ("CONN_MAX_AGE", "CONN_HEALTH_CHECKS")}
    connection.close()
    connection.close_pool()
    pool = options.pop("pool", None)
    connection.settings_dict.update(CONN_MAX_AGE=600, CONN_HEALTH_CHECKS=True)
    yield
    connection.close()
    connection.settings_dict.update(saved)
    if pool is not None:
        options["pool"] = pool


def test_a_dropped_persistent_connection_is_replaced_before_the_next_request(
    world, agent_client, persistent_connections
):
    assert agent_client.post(reverse("runs_api:run_create"), {"end_user": "u"}, format="json").status_code == 201
    assert connection.connection is not None  # kept open after the request
    assert _terminate(_request_backend_pid())
    # What the request handler does at request_started (Django's test client disconnects it):
    # CONN_HEALTH_CHECKS finds the dead connection and drops it, so the request reconnects.
    close_old_connections()
    response = agent_client.post(reverse("runs_api:run_create"), {"end_user": "u"}, format="json")
    assert response.status_code == 201, response.content


@pytest.fixture
def one_pooled_connection():
    """The default pool (console/env.py), cut to one connection: the next request must take the dead one."""
    options = connection.settings_dict["OPTIONS"]
    assert options.get("pool"), "the default DATABASE_URL gives a pool"
    saved = options["pool"]
    connection.close()
    connection.close_pool()
    options["pool"] = {**saved, "max_size": 1}
    yield
    connection.close()
    connection.close_pool()
    options["pool"] = saved


def test_a_dropped_pooled_connection_is_replaced_before_the_next_request(world, agent_client, one_pooled_connection):
    """After a database restart the pool's idle connections are dead: the pool checks the one a request
    takes and opens a new one instead of failing the request."""
    assert agent_client.post(reverse("runs_api:run_create"), {"end_user": "u"}, format="json").status_code == 201
    dead = _request_backend_pid()
    close_old_connections()  # what the request handler does at request_finished: back to the pool
    assert connection.connection is None
    assert _terminate(dead)
    response = agent_client.post(reverse("runs_api:run_create"), {"end_user": "u"}, format="json")
    assert response.status_code == 201, response.content
    assert _request_backend_pid() != dead


def test_a_connection_dropped_mid_request_writes_nothing_half(world, agent_client):
    run_id = agent_client.post(reverse("runs_api:run_create"), {"end_user": "u"}, format="json").json()["run_id"]
    batch = {
        "calls": [
            {"call_id": "c1", "name": "faults.lookup", "arguments": {}},
            {"call_id": "c2", "name": "faults.lookup", "arguments": {}},
        ]
    }
    url = reverse("runs_api:run_calls", kwargs={"run_id": run_id})
    agent_client.raise_request_exception = False
    KILL["pid"] = _request_backend_pid()
    try:
        failed = agent_client.post(url, batch, format="json")
    finally:
        connection.close()  # the test's side of the same dead connection; later tests need a live one
    # The reads ran but could not be recorded: no side effect, so the agent is told to send the batch again.
    assert failed.status_code == 200, failed.content
    assert [(r["status"], r["error"]["class"], r["error"]["code"]) for r in failed.json()["results"]] == [
        ("error", "transient", "not_recorded")
    ] * 2
    assert ToolCall.objects.filter(run_id=run_id).count() == 0  # all of the batch or none of it

    retried = agent_client.post(url, batch, format="json")
    assert retried.status_code == 200, retried.content
    assert [r["status"] for r in retried.json()["results"]] == ["ok", "ok"]
    assert sorted(ToolCall.objects.filter(run_id=run_id).values_list("call_id", "status")) == [
        ("c1", "succeeded"),
        ("c2", "succeeded"),
    ]
