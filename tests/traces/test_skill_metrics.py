"""Skill metrics on known data: calls per task (per run that used the skill) and the skill's share of the
tool-result bytes of each run; the page shows them to the owning team only, never another tenant's text."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from console.services import create_agent
from tests.traces.conftest import make_run
from traces.metrics import Spread
from traces.recording import record_span

pytestmark = pytest.mark.django_db


def spans(run, skill: str, sizes: list[int], start) -> None:
    for i, size in enumerate(sizes):
        record_span(
            run=run,
            kind="tool_call",
            name=skill,
            started_at=start + timedelta(seconds=i),
            ended_at=start + timedelta(seconds=i, milliseconds=10),
            skill_name=skill,
            verdict="allow",
            attributes={"airlock.result.bytes": size},
        )


@pytest.fixture
def three_runs(acme, globex, agent, snapshot, owned_skill):
    """The owned skill: 1 call in run A, 2 in run B, 6 in run C (of globex); other skills fill the rest."""
    start = timezone.now() - timedelta(minutes=30)
    a = make_run(tenant=acme, agent=agent, snapshot=snapshot, task="acme task A")
    b = make_run(tenant=acme, agent=agent, snapshot=snapshot, task="acme task B")
    globex_agent, _ = create_agent(tenant=globex, name="globex-bot", role="support")
    c = make_run(tenant=globex, agent=globex_agent, snapshot=snapshot, task="globex secret task")
    spans(a, owned_skill.name, [100], start)  # A: 100 of 400 bytes
    spans(a, "other.search", [300], start)
    spans(b, owned_skill.name, [50, 50], start)  # B: 100 of 100 bytes
    spans(c, owned_skill.name, [10] * 6, start)  # C: 60 of 600 bytes
    spans(c, "globex.private_tool", [540], start)
    return owned_skill


def test_calls_per_task_and_result_byte_share_per_run(client, owner, three_runs):
    client.force_login(owner)
    response = client.get(reverse("traces:skill", args=[three_runs.name]), {"window": "1h"})
    m = response.context["m"]
    assert m.calls == 9
    assert m.calls_per_task == Spread(mean=3.0, p50=2, p95=6)
    assert m.run_byte_share.mean == pytest.approx((0.25 + 1.0 + 0.1) / 3)
    assert (m.run_byte_share.p50, m.run_byte_share.p95) == (0.25, 1.0)
    assert m.context_share == pytest.approx(260 / 1100)
    body = response.content.decode()
    assert "Calls per task" in body and "Share of result bytes per run" in body
    assert "25.0%" in body  # the median share
    assert "globex secret task" not in body and "globex.private_tool" not in body and "other.search" not in body


def test_metrics_of_an_unowned_skill_are_404_for_another_tenant(client, outsider, three_runs):
    client.force_login(outsider)
    assert client.get(reverse("traces:skill", args=[three_runs.name])).status_code == 404


def test_no_calls_give_empty_figures(client, owner, owned_skill):
    client.force_login(owner)
    m = client.get(reverse("traces:skill", args=[owned_skill.name])).context["m"]
    assert m.calls_per_task == Spread() and m.run_byte_share == Spread()
