from types import SimpleNamespace

import pytest

from runs import demo
from traces.dashboard import trace_cards
from traces.models import Span, Trace
from traces.recording import record_span

pytestmark = pytest.mark.django_db


def test_demo_seeder_builds_one_trace_idempotently(agent, snapshot):
    context = SimpleNamespace(agents={"acme/support-bot": agent}, lines=[])
    demo.seed(context)
    demo.seed(context)
    trace = Trace.objects.get(name=demo.DEMO_TASK)
    assert trace.span_count == 10 and trace.error_count == 2
    assert set(Span.objects.filter(trace=trace).values_list("verdict", flat=True)) >= {"allow", "confirm", "deny"}


def test_dashboard_card_counts_visible_traces(viewer, outsider, run):
    from django.utils import timezone

    record_span(run=run, kind="tool_call", name="x", started_at=timezone.now(), error_class="timeout")
    [card] = trace_cards(viewer)
    assert card["value"] == 1 and card["hint"] == "1 with errors"
    assert trace_cards(outsider)[0]["value"] == 0
