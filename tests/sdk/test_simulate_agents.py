"""`manage.py simulate_agents` against a live Airlock seeded with the demo: what a newcomer should see."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from airlock.demo import seed_all
from approvals.models import ApprovalRequest
from console.models import Agent
from runs.models import CallStatus, Run, ToolCall


@pytest.fixture
def demo(transactional_db):
    context = seed_all()
    return context


def simulate(url: str, *extra: str) -> str:
    out = StringIO()
    call_command("simulate_agents", "--base-url", url, "--downstream-port", "0", "--seed", "7", *extra, stdout=out)
    return out.getvalue()


def test_the_gentle_stream_leaves_approvals_a_tainted_run_and_a_denied_call(asgi_live_server, demo):
    output = simulate(asgi_live_server.url, "--gentle", "--rate", "2", "--duration", "3")
    sims = Agent.objects.filter(tenant__slug="acme", name__startswith="sim-")
    assert set(sims.values_list("name", flat=True)) == {"sim-support", "sim-docs", "sim-ops"}
    runs = Run.objects.filter(agent__in=sims)
    assert runs.count() >= 4, output
    assert ApprovalRequest.objects.filter(call__run__in=runs, status="pending").exists(), output
    tainted = runs.filter(tainted=True)
    assert tainted.exists(), output
    assert ToolCall.objects.filter(
        run__in=tainted, name="admin.delete_user_permanently", status=CallStatus.DENIED
    ).exists(), output
    assert ToolCall.objects.filter(run__in=runs, name="workspace.read_local_notes", status="succeeded").exists()
    assert ToolCall.objects.filter(run__in=runs, error_class="timeout_unknown").exists(), output
    assert "outcomes:" in output


def test_keys_are_rotated_at_each_start(asgi_live_server, demo):
    simulate(asgi_live_server.url, "--gentle", "--rate", "1", "--duration", "0.5")
    before = Agent.objects.get(tenant__slug="acme", name="sim-support").key_hash
    simulate(asgi_live_server.url, "--gentle", "--rate", "1", "--duration", "0.5")
    assert Agent.objects.get(tenant__slug="acme", name="sim-support").key_hash != before


def test_burst_drives_concurrent_agents_without_waiting_on_people(asgi_live_server, demo):
    output = simulate(asgi_live_server.url, "--burst", "--agents", "4", "--duration", "3")
    assert "calls/s" in output and "batch latency p50" in output
    assert "waiting in the inbox" not in output
