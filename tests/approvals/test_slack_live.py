"""Deciding from Slack, live: PostgreSQL, the Redis cache that remembers signed requests, and a real
Celery worker that resumes the call and answers on the response_url (a real local HTTP server).
An agent's refund waits for approval; forged and stale clicks change nothing; the signed click,
delivered twice at once, approves exactly once and the downstream runs once."""

import json
import threading
import time
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse

from approvals import notices, slack
from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalStatus, SlackLink
from approvals.notifications import save_notification_channels
from console.celery import app as celery_app
from tests.approvals import worker_tools
from tests.approvals.gate_world import build_refund_world
from tests.approvals.receiver import Receiver
from tests.celery_worker import start_worker, stop_worker, wait_for, worker_env
from tests.runs.conftest import post_calls, start_run

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

SECRET = "5ecret5ecret5ecret5ecret5ecret55"


@pytest.fixture
def live(tmp_path, monkeypatch, settings):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(ledger))
    settings.AIRLOCK_SLACK_RESPONSE_HOSTS = ["127.0.0.1"]
    receiver = Receiver().start()
    env = worker_env(
        AIRLOCK_TEST_LEDGER=str(ledger),
        AIRLOCK_SLACK_RESPONSE_HOSTS="127.0.0.1",
        AIRLOCK_EGRESS_ALLOW_PRIVATE="1",
        AIRLOCK_EGRESS_PORTS="*",
    )
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()
    worker = start_worker("slack", tmp_path / "worker.log", env, "--pool=solo", "-I", "tests.approvals.worker_tools")
    yield receiver
    stop_worker(worker)
    receiver.stop()
    celery_app.conf.task_always_eager = True


def _signed(body: bytes, timestamp: int, secret: str = SECRET) -> dict:
    stamp = str(timestamp)
    return {
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": stamp,
        "HTTP_X_SLACK_SIGNATURE": slack.signature_of(secret=secret, timestamp=stamp, body=body),
    }


def _press(body: bytes, headers: dict):
    url = reverse("slack:actions", args=["acme"])
    return Client().generic("POST", url, body, content_type="application/x-www-form-urlencoded", **headers)


def test_a_signed_click_approves_exactly_once_and_forgeries_change_nothing(agent_client, acme, approver, live):
    build_refund_world(acme)
    save_notification_channels(tenant=acme, user=None, webhook_url="", email_enabled=True, slack_signing_secret=SECRET)
    SlackLink.objects.create(tenant=acme, user=approver, slack_team_id="T0ACME", slack_user_id="U0APPROVER")
    run = start_run(agent_client)
    arguments = {"customer_id": "c-1", "amount_cents": 99}
    call = {"call_id": "a", "name": "billing.create_refund", "arguments": arguments}
    result = post_calls(agent_client, run["run_id"], [call]).json()["results"][0]
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])

    payload = {
        "type": "block_actions",
        "user": {"id": "U0APPROVER", "username": "approver"},
        "team": {"id": "T0ACME"},
        "actions": [{"action_id": notices.SLACK_APPROVE, "value": str(approval.pk)}],
        "response_url": live.url,
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    now = int(time.time())
    assert _press(body, _signed(body, now, secret="forged-forged-forged-forged-0000")).status_code == 401
    assert _press(body, _signed(body, now - 6 * 60)).status_code == 401  # stale: six minutes old

    headers = _signed(body, now)
    answers: list[int] = []
    presses = [threading.Thread(target=lambda: answers.append(_press(body, headers).status_code)) for _ in range(2)]
    for press in presses:
        press.start()
    for press in presses:
        press.join(30)
    assert sorted(answers) == [200, 409]  # one acted on, its twin refused as a replay

    wait_for(lambda: ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.EXECUTED, 60, "execution")
    wait_for(lambda: live.requests, 60, "the answer on the response_url")
    assert _press(body, _signed(body, now)).status_code == 409  # the same signed click, later
    approval.refresh_from_db()
    assert approval.decided_by == approver and approval.decided_via == "slack"
    assert ApprovalEvent.objects.filter(request=approval, action="approved").count() == 1
    assert len(worker_tools.executions()) == 1
    [answer] = [json.loads(r.body) for r in live.requests]
    assert answer["replace_original"] is True and "approved by approver via slack" in answer["text"]
