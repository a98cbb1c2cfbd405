"""An agent asks a person (`human.ask`) on the demo's own data: the question arrives live in alice's open
inbox, she answers it with one of its choices, and the answer comes back to the agent as the call's result
on its run's event feed. After a reload the question is gone and the recently decided list says so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ApprovalStatus
from console.models import Agent
from runs import demo_tools
from runs.gate import process_batch
from runs.models import RunEvent
from runs.services import start_run
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as

pytestmark = pytest.mark.browser
SCREENSHOTS = Path(__file__).resolve().parents[2] / (
    "docs/screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else "test-artifacts"
)
QUESTION = "Ada's parcel came back damaged. Refund in full, or send a replacement?"


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    demo_tools.reset()
    return {u.username: u for u in get_user_model().objects.all()}


def test_alice_answers_an_agents_question_live_and_the_answer_returns_to_the_agent(asgi_live_server, demo, login_as):
    page = login_as(demo["alice"])
    page.goto(f"{asgi_live_server.url}/approvals/")
    expect(page.locator("#live-status")).to_have_text("live")

    agent = Agent.objects.get(tenant__slug="acme", name="support-bot")
    run = start_run(agent=agent, end_user="cus_ada100", end_user_roles=["customer"], task="Ada's damaged parcel")
    asked = process_batch(
        run=run,
        calls=[
            {
                "call_id": "ask-1",
                "name": "human.ask",
                "arguments": {"question": QUESTION, "choices": ["refund in full", "send a replacement"]},
            }
        ],
    )[0]
    assert asked["status"] == "approval_required"
    question = ApprovalRequest.objects.get(pk=asked["approval_id"])

    card = page.locator(f"#approval-{question.pk}")
    expect(card.locator("[data-question]")).to_have_text(QUESTION)  # arrived live, without a reload
    expect(card.locator("[data-action=approve]")).to_have_count(0)  # a question is answered, not approved
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    card.screenshot(path=str(SCREENSHOTS / "approver-question-card.png"))
    card.get_by_role("button", name="send a replacement").click()
    expect(page.locator(f"#approval-{question.pk}[data-decided]")).to_contain_text(
        "answered by alice: “send a replacement”"
    )

    question.refresh_from_db()
    assert question.status == ApprovalStatus.EXECUTED and question.answer == "send a replacement"
    completed = RunEvent.objects.get(run=run, kind="call.completed").payload["result"]
    assert completed["status"] == "ok" and completed["content"] == {"answer": "send a replacement"}

    page.reload()
    expect(page.locator(f"#approval-{question.pk}")).to_have_count(0)
    expect(page.locator("table.audit")).to_contain_text("human.ask")
