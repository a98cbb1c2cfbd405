"""PostgreSQL ingest path (COPY into a staging table, INSERT ... ON CONFLICT DO NOTHING RETURNING)
under concurrent duplicate requests: every span stored once and counted once."""

import json
import threading

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from traces.models import Span, Trace

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_concurrent_identical_batches_store_and_count_each_span_once(agent_and_key):
    _, key = agent_and_key
    spans = [
        {
            "trace_id": "e" * 32,
            "span_id": f"{i + 1:016x}",
            "kind": "model_turn",
            "name": f"t{i}",
            "started_at": "2026-05-01T12:00:00Z",
            "error_class": "timeout" if i % 10 == 0 else "",
        }
        for i in range(400)
    ]
    body = json.dumps({"spans": spans})
    Client().post(
        reverse("traces_api:span_batch"),
        data=json.dumps({"spans": spans[:1]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # the trace exists
    results: list[dict] = []
    barrier = threading.Barrier(4)

    def send() -> None:
        barrier.wait()
        response = Client().post(
            reverse("traces_api:span_batch"),
            data=body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
        results.append(response.json())
        connection.close()

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r["stored"] for r in results) == 399  # span 1 was stored by the first request
    trace = Trace.objects.get(trace_id="e" * 32)
    assert Span.objects.filter(trace=trace).count() == 400
    assert (trace.span_count, trace.error_count) == (400, 40)
