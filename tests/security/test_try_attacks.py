"""The owners' Try page and manifest tests, attacked: they ask the decision kernel like every other path and
call nothing the ruling does not let run (issue 43, holes 1 and 9).

- a production writer named as a sandbox is refused at draft, and a version that reached the database with
  one anyway cannot be tried;
- a try whose verdict is deny, or in a frozen tenant, calls nothing, sandbox or real target;
- a confirm runs only against a registered sandbox;
- a manifest test may name only a tenant its author belongs to, and learns nothing of any other.
"""

import pytest
from django.urls import reverse

from console.services import freeze_tenant
from policies.models import Grant
from registry import services
from registry.models import Skill, SkillTestRun, SkillVersion, VersionStatus
from runs import demo_tools
from runs.adapters.python import register
from tests.conftest import make_user
from tests.registry.factories import manifest
from tests.runs.test_trials import GOOD, SANDBOX_CALLS, client_for, email_manifest, try_url

pytestmark = pytest.mark.django_db
TICKET_CALLS: list[dict] = []
TICKET_INPUT = {
    "type": "object",
    "properties": {"ticket_id": {"type": "string"}, "status": {"type": "string", "enum": ["open", "closed"]}},
    "required": ["ticket_id", "status"],
    "additionalProperties": False,
}


@register(
    "try_attacks.sandbox_ticket_status",
    effect="read",
    teams=("support-tools",),
    sandbox_for="demo.update_ticket_status",
)
def sandbox_ticket_status(*, arguments: dict, context) -> dict:
    TICKET_CALLS.append(arguments)
    return {"found": True, "status": arguments["status"]}


@pytest.fixture(autouse=True)
def clean_state():
    demo_tools.reset()
    SANDBOX_CALLS.clear()
    TICKET_CALLS.clear()


def ticket_manifest(**overrides) -> dict:
    return manifest(
        "support.set_ticket_status",
        input_schema=TICKET_INPUT,
        output_schema={"type": "object"},
        risk={"effect": "write", "data_classification": "internal", "approval": "not_required"},
        permissions={"allowed_agent_roles": ["support"], "allowed_tenants": ["*"]},
        execution__adapter="python:demo.update_ticket_status",
        **overrides,
    )


def ticket_status() -> str:
    return demo_tools._state["tickets"]["tkt_0001"]["status"]


CLOSE = {"ticket_id": "tkt_0001", "status": "closed"}


def test_a_production_writer_is_refused_as_a_sandbox_and_a_stored_one_cannot_be_tried(owner, acme):
    Grant.objects.create(tenant=acme, agent_role="support", skill_pattern="support.*")
    with pytest.raises(services.ManifestInvalid) as refused:
        services.create_draft_version(
            manifest=ticket_manifest(execution__sandbox="python:demo.create_email_draft"), author=owner
        )
    assert {e["code"] for e in refused.value.errors} == {"not_a_sandbox"}
    # A version stored before the rule (or past it, straight into the database) is checked again when tried.
    draft = services.create_draft_version(
        manifest=ticket_manifest(execution__sandbox="python:try_attacks.sandbox_ticket_status"), author=owner
    )
    bypass = {**draft.manifest, "execution": {**draft.manifest["execution"], "sandbox": "python:demo.send_email"}}
    SkillVersion.objects.filter(pk=draft.pk).update(manifest=bypass)
    response = client_for(owner).post(
        try_url(name="support.set_ticket_status"), {"arguments": CLOSE, "role": "support"}, format="json"
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "not_triable"
    assert demo_tools.outbox() == [] and ticket_status() == "open"


def test_a_try_in_a_frozen_tenant_calls_nothing(owner, acme):
    Grant.objects.create(tenant=acme, agent_role="support", skill_pattern="support.*")
    services.create_draft_version(
        manifest=ticket_manifest(execution__sandbox="python:try_attacks.sandbox_ticket_status"), author=owner
    )
    url = try_url(name="support.set_ticket_status")
    ran = client_for(owner).post(url, {"arguments": CLOSE, "role": "support"}, format="json").json()
    assert ran["outcome"] == "ok" and len(TICKET_CALLS) == 1  # the sandbox, while acme is not frozen
    freeze_tenant(tenant=acme, by=make_user("admin", tenant=acme), reason="incident 7")
    frozen = client_for(owner).post(url, {"arguments": CLOSE, "role": "support"}, format="json").json()
    assert frozen["outcome"] == "not_run" and frozen["verdict"] == "deny"
    assert frozen["why"]["decision"]["rule_id"] == "tenant_frozen"
    assert len(TICKET_CALLS) == 1 and ticket_status() == "open"


def test_a_denied_read_is_not_run_against_its_real_target(owner, acme):
    Grant.objects.create(tenant=acme, agent_role="support", skill_pattern="docs.*")
    services.create_draft_version(manifest=manifest(), author=owner)
    url = try_url(name="docs.search_documentation")
    for role in ("nobody", "support-but-ungranted"):
        body = client_for(owner).post(url, {"arguments": {"query": "rate limits"}, "role": role}, format="json")
        tried = body.json()
        assert tried["verdict"] == "deny" and tried["outcome"] == "not_run", role
        assert "results" not in tried["result"]  # the real read never answered
    allowed = client_for(owner).post(url, {"arguments": {"query": "rate limits"}, "role": "support"}, format="json")
    assert allowed.json()["outcome"] == "ok" and "results" in allowed.json()["result"]


def test_a_confirm_runs_only_against_a_registered_sandbox(owner, acme):
    Grant.objects.create(tenant=acme, agent_role="support", skill_pattern="support.*")
    services.create_draft_version(
        manifest=email_manifest(execution__sandbox="python:trials_test.sandbox_send_email"), author=owner
    )
    tried = client_for(owner).post(try_url(), {"arguments": GOOD, "role": "support"}, format="json").json()
    assert tried["verdict"] == "confirm" and tried["target"] == "python:trials_test.sandbox_send_email"
    assert len(SANDBOX_CALLS) == 1 and demo_tools.outbox() == []


def test_a_manifest_test_cannot_name_a_tenant_its_author_is_not_in(owner_team, acme):
    outsider = make_user("drifter", tenant=None)  # in the owning team, in no tenant
    owner_team.members.add(outsider)
    Grant.objects.create(tenant=acme, agent_role="support", skill_pattern="support.*")
    probes = [
        {"name": "acme's verdict", "arguments": GOOD, "role": "support", "tenant": "acme", "verdict": "allow"},
        {"name": "no such tenant", "arguments": GOOD, "role": "support", "tenant": "initech", "verdict": "allow"},
    ]
    body = email_manifest(execution__sandbox="python:trials_test.sandbox_send_email", tests=probes)
    draft = services.create_draft_version(manifest=body, author=outsider)
    response = client_for(outsider).post(
        reverse("registry_api:version-publish", args=["support.notify_customer", "1.0.0"])
    )
    assert response.status_code == 400
    run = SkillTestRun.objects.get(version=draft)
    failures = [result["failures"] for result in run.results]
    # the same words for a tenant that exists and one that does not: nothing of acme is learned
    assert failures == [
        ["you belong to no tenant acme: a test may name only tenants its author belongs to"],
        ["you belong to no tenant initech: a test may name only tenants its author belongs to"],
    ]
    assert "confirm" not in response.content.decode() and SANDBOX_CALLS == []
    assert Skill.objects.get(name="support.notify_customer").versions.get().status == VersionStatus.DRAFT
