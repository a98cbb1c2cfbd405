"""The "why" panel in headless Chromium, on the demo's data (`seed_demo`): alice (an approver of acme) opens
a denied, a validation-failed and an approved-and-executed call and reads all eight answers.

With AIRLOCK_UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/ (linked from docs/traces.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from approvals.demo import CALLS as DEMO_CALLS
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval
from console.models import Agent, Tenant
from console.tenancy import teams_for
from policies import services as policy_services
from policies.models import Scope
from registry.models import Skill
from runs import demo_tools
from runs.gate import process_batch
from runs.models import ToolCall
from runs.services import start_run
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as
from traces.models import Trace

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOTS = (
    ROOT / "docs" / "screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
)
EXPOSED = [
    "support.read_inbound_email",
    "customer.read_profile",
    "customer.list_orders",
    "billing.create_refund_request",
    "support.send_email",
    "admin.delete_user_permanently",
]
QUESTIONS = 8
REFUND = {"order_id": "ord_5002", "amount_cents": 4500, "currency": "EUR", "reason_code": "damaged"}
TAINTED_REFUND = {
    "id": "refund-tainted",
    "verdict": "deny",
    "condition": 'skill.name == "billing.create_refund_request" && run.tainted',
    "reason": "Refunds are refused once the run has read untrusted content.",
}


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    demo_tools.reset()
    users = {u.username: u for u in get_user_model().objects.all()}
    acme = Tenant.objects.get(slug="acme")
    policy = policy_services.create_policy(  # the demo's own deny rule is for admin agents, which it has none of
        name="Acme refund guardrails", scope=Scope.TENANT, tenant=acme, created_by=users["adam"], rules=[TAINTED_REFUND]
    )
    policy_services.publish_policy_version(
        version=policy_services.draft_of(policy), user=users["adam"], reason="no refunds from tainted runs"
    )
    agent = Agent.objects.get(tenant__slug="acme", name="support-bot")
    run = start_run(agent=agent, end_user="cus_ada100", end_user_roles=["customer"], task="Erase Ada's account")
    results = process_batch(
        run=run,
        exposed_tools=EXPOSED,
        calls=[
            {"call_id": "read-1", "name": "support.read_inbound_email", "arguments": {"ticket_id": "tkt_0001"}},
            {"call_id": "refund-2", "name": "billing.create_refund_request", "arguments": REFUND},
            {"call_id": "profile-1", "name": "customer.read_profile", "arguments": {"customer_id": "ada", "x": 1}},
        ],
    )
    assert [r["status"] for r in results] == ["ok", "error", "error"], results
    refund = ApprovalRequest.objects.get(skill_name="billing.create_refund_request", status=ApprovalStatus.PENDING)
    edited = {**DEMO_CALLS[0]["arguments"], "amount_cents": 9900}  # the stored ones are masked (confidential)
    decide_approval(approval=refund, user=users["alice"], decision="approve", arguments=edited)
    return {"run": run, "refund": refund, "alice": users["alice"]}


def _why(asgi_live_server, page, call: ToolCall, name: str) -> None:
    trace = Trace.objects.get(run=call.run)
    page.goto(asgi_live_server.url + reverse("traces:why", args=[trace.pk, call.pk]))
    expect(page.locator(".why li")).to_have_count(QUESTIONS)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def test_the_why_panel_answers_eight_questions_for_denied_invalid_and_approved_calls(asgi_live_server, demo, login_as):
    page = login_as(demo["alice"])
    page.set_viewport_size({"width": 1100, "height": 800})
    panel = page.locator(".why")

    _why(asgi_live_server, page, ToolCall.objects.get(run=demo["run"], call_id="refund-2"), "why-denied.png")
    expect(panel).to_contain_text("6 tools; billing.create_refund_request was among them")
    expect(panel).to_contain_text("reported by the agent's framework")
    expect(panel).to_contain_text("refund-tainted")
    expect(panel).to_contain_text("support.read_inbound_email returned untrusted content")
    expect(panel).to_contain_text("denied: denied_by_policy")

    _why(asgi_live_server, page, ToolCall.objects.get(run=demo["run"], call_id="profile-1"), "why-validation.png")
    expect(panel).to_contain_text("field customer_id")
    expect(panel).to_contain_text("Not reached.")

    demo["refund"].call.refresh_from_db()
    _why(asgi_live_server, page, demo["refund"].call, "why-approved.png")
    expect(panel).to_contain_text("the callable set at the time, not reported by the agent")
    expect(panel).to_contain_text("Approval required; approved.")
    expect(panel).to_contain_text("alice")
    expect(panel).to_contain_text("arguments edited")
    expect(panel).to_contain_text("succeeded: the model got the result.")


def test_the_skill_page_shows_calls_per_task_and_result_byte_share(asgi_live_server, demo, login_as):
    olivia = get_user_model().objects.get(username="olivia")  # an owner in support-tools
    skill = Skill.objects.filter(owner_team__in=teams_for(olivia), name="support.read_inbound_email").get()
    page = login_as(olivia)
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(asgi_live_server.url + reverse("traces:skill", args=[skill.name]))
    expect(page.locator(".stat", has_text="Calls per task")).to_contain_text("1.0")
    expect(page.locator(".stat", has_text="Share of result bytes per run")).to_contain_text("%")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "skill-metrics.png"), full_page=True)
