"""`GET /api/v1/runs/{id}/events?after=&wait=`: `wait` is a finite number of seconds clamped to [0, 30] and
`after` an event id; anything else is a 400 at once, never a poll that does not end (issue 12)."""

import time

import pytest
from django.urls import reverse

from runs.api import events as events_view
from runs.events import append_event
from tests.approvals.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def url(acme, agent):
    return reverse("runs_api:run_events", args=[make_run(tenant=acme, agent=agent).pk])


@pytest.mark.parametrize(
    "wait",
    [
        "nan",
        "NaN",
        "-nan",
        "inf",
        "-inf",
        "Infinity",
        "1e400",
        "-1",
        "-0.001",
        "soon",
        "1s",
        "0x10",
        "١",
        "1_000",
        " 1",
        "1e",
        ".",
    ],
)
def test_a_wait_that_is_not_a_finite_non_negative_number_is_refused_at_once(agent_client, url, wait):
    started = time.monotonic()
    response = agent_client.get(url, {"wait": wait})
    assert time.monotonic() - started < 2
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["class"], error["code"]) == ("validation", "invalid_wait")
    assert "'wait' must be a number of seconds from 0 to 30" in error["message"]


@pytest.mark.parametrize(
    "after", ["-1", "x", "1.5", "1e3", " 1", "+1", "0x10", "²", "١", "9223372036854775808", "9" * 5000]
)
def test_an_after_that_is_not_an_event_id_is_refused(agent_client, url, after):
    response = agent_client.get(url, {"after": after})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["class"], error["code"]) == ("validation", "invalid_after")
    assert "'after' must be the id of an event" in error["message"] and len(error["message"]) < 200


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("", 0.0),
        ("0", 0.0),
        ("0.25", 0.25),
        ("30", 30.0),
        ("31", 30.0),
        ("1e3", 30.0),
        ("1e308", 30.0),
        (".5", 0.5),
        ("2.", 2.0),
        ("0" * 40, 0.0),
    ],
)
def test_wait_is_clamped_to_thirty_seconds(text, seconds):
    assert events_view._parse_wait(text) == seconds


def test_a_long_wait_still_returns_at_once_when_an_event_is_there(agent_client, acme, agent):
    run = make_run(tenant=acme, agent=agent)
    event = append_event(run=run, kind="run.status", payload={"status": "running", "reason": "test"})
    started = time.monotonic()
    body = agent_client.get(reverse("runs_api:run_events", args=[run.pk]), {"wait": "1e9", "after": "0"}).json()
    assert [e["id"] for e in body["events"]] == [event.id] and time.monotonic() - started < 2


def test_the_largest_event_id_is_a_valid_cursor(agent_client, url):
    body = agent_client.get(url, {"after": str(2**63 - 1)}).json()
    assert body["events"] == [] and body["next_cursor"] == 2**63 - 1


def test_a_short_wait_waits(agent_client, url):
    started = time.monotonic()
    body = agent_client.get(url, {"wait": "0.2"}).json()
    assert body["events"] == [] and 0.15 <= time.monotonic() - started < 2
