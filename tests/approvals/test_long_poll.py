import threading
import time

import pytest
from django.db import close_old_connections
from django.urls import reverse

from runs.events import append_event
from tests.approvals.factories import make_run, open_request

pytestmark = pytest.mark.django_db


def test_events_after_cursor(agent_client, acme, agent):
    request = open_request(tenant=acme, agent=agent)
    url = reverse("runs_api:run_events", args=[request.call.run.pk])
    body = agent_client.get(url).json()
    assert [e["kind"] for e in body["events"]] == ["approval.requested"]
    assert body["events"][0]["payload"] == {"approval_id": request.pk, "call_id": request.call.call_id}
    assert body["next_cursor"] == body["events"][0]["id"] and body["run_status"] == "paused"
    again = agent_client.get(url, {"after": body["next_cursor"]}).json()
    assert again == {"events": [], "next_cursor": body["next_cursor"], "run_status": "paused"}


def test_wait_returns_empty_after_the_wait(agent_client, acme, agent, clock):
    run = make_run(tenant=acme, agent=agent)
    started, real_start = clock.monotonic(), time.monotonic()
    body = agent_client.get(reverse("runs_api:run_events", args=[run.pk]), {"wait": "20"}).json()
    assert body["events"] == [] and clock.monotonic() - started >= 20
    assert time.monotonic() - real_start < 2  # the clock's sleeps advanced it; nobody waited 20 s


@pytest.mark.django_db(transaction=True)
def test_wait_returns_as_soon_as_an_event_arrives(agent_client, acme, agent):
    run = make_run(tenant=acme, agent=agent)

    def later():
        time.sleep(0.2)  # the request below is polling by now
        append_event(run=run, kind="run.status", payload={"status": "running", "reason": "test"})
        close_old_connections()

    threading.Thread(target=later).start()
    started = time.monotonic()
    body = agent_client.get(reverse("runs_api:run_events", args=[run.pk]), {"wait": "10"}).json()
    elapsed = time.monotonic() - started
    assert [e["kind"] for e in body["events"]] == ["run.status"] and 0.15 < elapsed < 3


def test_other_tenants_agent_gets_404_and_humans_401(outsider_agent_client, client, approver, acme, agent):
    run = make_run(tenant=acme, agent=agent)
    url = reverse("runs_api:run_events", args=[run.pk])
    response = outsider_agent_client.get(url)
    assert response.status_code == 404 and response.json()["error"]["class"] == "not_found"
    client.force_login(approver)
    assert client.get(url).status_code == 401


def test_another_agent_of_the_same_tenant_cannot_follow_the_run(acme, agent):
    from rest_framework.test import APIClient

    from console.services import create_agent

    run = make_run(tenant=acme, agent=agent)
    append_event(run=run, kind="run.status", payload={"status": "running", "reason": ""})
    _, other_key = create_agent(tenant=acme, name="docs-bot", role="developer")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    response = other.get(reverse("runs_api:run_events", args=[run.pk]))
    assert response.status_code == 404  # as for GET /runs/{id}: a run belongs to the agent that started it


def test_bad_parameters_and_method(agent_client, acme, agent):
    run = make_run(tenant=acme, agent=agent)
    url = reverse("runs_api:run_events", args=[run.pk])
    assert agent_client.get(url, {"after": "x"}).status_code == 400
    assert agent_client.post(url).status_code == 405
