"""Uploads of locally decided calls, attacked (issue 43): impossible times, a flood past the agent's rate limit,
mail sent again for every new run, calls decided while suspended, frozen, under an expired bundle or a role
never opted in, canary versions staged for other tenants, and retention erasing what was flagged."""

from __future__ import annotations

import pytest
from django.core import mail

from runs import ratelimit
from runs.models import LocalDecision, ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import published_policy, rule
from tests.runs.test_local_calls import run_id, skills, spooled, upload  # noqa: F401 - reused fixtures

pytestmark = pytest.mark.django_db


def at_window_start(clock) -> None:
    """Move Airlock's clock to just after a rate-limit window opens, so a test's calls share one window."""
    clock.advance(ratelimit.WINDOW_S - clock.time() % ratelimit.WINDOW_S + 1)


# 7a: impossible times -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("decided_at", "2026-02-30T00:00:00+00:00"),
        ("decided_at", "2026-01-01T25:00:00+00:00"),
        ("decided_at", "2026-01-01T10:00:00+99:00"),
        ("finished_at", "2026-13-01T10:00:00+00:00"),
    ],
)
def test_an_impossible_time_is_a_400_naming_the_field_and_nothing_of_the_batch_is_recorded(
    agent_client, run_id, field, value
):
    batch = [spooled("good-1"), {**spooled("bad", sequence=2), field: value}, spooled("good-2", sequence=3)]
    response = upload(agent_client, run_id, batch)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["class"] == "validation" and error["code"] == "invalid_time"
    assert error["fields"] == [{"field": f"calls[1].{field}", "message": error["fields"][0]["message"]}]
    assert f"calls[1].{field}" in error["message"]
    assert not ToolCall.objects.filter(run_id=run_id).exists()


# 8: the rate limit and the mail --------------------------------------------------------------------


def test_uploads_count_against_the_agents_rate_limit_and_a_flood_is_refused_whole(
    agent_client, run_id, settings, clock
):
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 6
    at_window_start(clock)
    first = upload(agent_client, run_id, [spooled(f"a-{i}", sequence=i) for i in range(6)])
    assert first.status_code == 200 and first.json()["recorded"] == 6
    flood = upload(agent_client, run_id, [spooled(f"b-{i}", sequence=10 + i) for i in range(3)])
    assert flood.status_code == 429, flood.content
    error = flood.json()["error"]
    assert error["code"] == "agent_rate_limited" and 1 <= error["retry_after"] <= ratelimit.WINDOW_S
    assert flood["Retry-After"] == str(error["retry_after"])
    assert not ToolCall.objects.filter(run_id=run_id, call_id__startswith="b-").exists()
    # the gate sees the same minute used up
    gate = post_calls(agent_client, run_id, [call("g-1", "crm.server_side")]).json()["results"][0]
    assert gate["error"]["code"] == "agent_rate_limited"
    clock.advance(error["retry_after"])  # the SDK sends the batch again once the minute is over
    again = upload(agent_client, run_id, [spooled(f"b-{i}", sequence=10 + i) for i in range(3)])
    assert again.status_code == 200 and again.json()["recorded"] == 3


def test_flag_mail_goes_once_per_agent_and_skill_not_again_for_each_new_run(
    agent_client, run_id, tenant_admin, django_capture_on_commit_callbacks
):
    published_policy([rule("no-notes", "deny", 'skill.name == "crm.note_local"', "notes are frozen")])
    runs = [run_id] + [start_run(agent_client)["run_id"] for _ in range(3)]
    for number, run in enumerate(runs):
        with django_capture_on_commit_callbacks(execute=True):
            answer = upload(agent_client, run, [spooled(f"n-{number}", "crm.note_local")])
        assert answer.json()["results"][0]["flagged"] is True
    recipients = sorted(address for message in mail.outbox for address in message.to)
    assert recipients == ["admin@example.com", "support-tools@example.com"]
    assert LocalDecision.objects.filter(flagged=True).count() == 4  # every call is still flagged on record
