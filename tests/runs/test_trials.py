"""Trying a version against its sandbox: the real target is never called, the gate's validation and verdict
apply, and only the skill's owners may try it or read its tries."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console.models import Team
from policies.models import Grant
from registry import services
from registry.models import Skill, SkillTry, SkillVersion
from runs import demo_tools
from runs.adapters.python import register
from runs.models import Run, ToolCall
from tests.conftest import login, make_user
from tests.registry.factories import manifest
from traces.models import Span

pytestmark = pytest.mark.django_db

EMAIL_INPUT = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "format": "email"},
        "subject": {"type": "string", "minLength": 1, "maxLength": 200},
        "body_text": {"type": "string", "minLength": 1},
    },
    "required": ["to", "subject", "body_text"],
    "additionalProperties": False,
}
EMAIL_OUTPUT = {
    "type": "object",
    "properties": {"message_id": {"type": "string"}, "sent_at": {"type": "string"}},
    "required": ["message_id"],
}
SANDBOX_CALLS: list[dict] = []


@register("trials_test.sandbox_send_email", effect="read", teams=("support-tools",), sandbox_for="demo.send_email")
def sandbox_send_email(*, arguments: dict, context) -> dict:
    SANDBOX_CALLS.append(arguments)
    return {"message_id": "msg_sandbox", "sent_at": "2026-12-01T09:00:00+00:00"}


def email_manifest(version: str = "1.0.0", **overrides) -> dict:
    fields = {
        "input_schema": EMAIL_INPUT,
        "output_schema": EMAIL_OUTPUT,
        "risk": {"effect": "external", "data_classification": "confidential", "approval": "required"},
        "permissions": {"allowed_agent_roles": ["support"], "allowed_tenants": ["*"]},
        "execution__adapter": "python:demo.send_email",
        "execution__max_attempts": 1,
        **overrides,
    }
    return manifest("support.notify_customer", version=version, **fields)


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def try_url(version: str = "1.0.0", name: str = "support.notify_customer") -> str:
    return reverse("runs_api:version_try", args=[name, version])


GOOD = {"to": "ada@example.com", "subject": "Your refund", "body_text": "It is on its way."}


@pytest.fixture(autouse=True)
def clean_state():
    demo_tools.reset()
    SANDBOX_CALLS.clear()


@pytest.fixture
def granted(acme):
    """acme's support agents may call the support and docs skills: a try runs only as the verdict allows."""
    Grant.objects.create(tenant=acme, agent_role="support", skill_pattern="support.*")
    Grant.objects.create(tenant=acme, agent_role="support", skill_pattern="docs.*")


@pytest.fixture
def sandboxed(owner):
    body = email_manifest(execution__sandbox="python:trials_test.sandbox_send_email")
    return services.create_draft_version(manifest=body, author=owner)


def test_a_try_goes_to_the_sandbox_and_never_to_the_real_target(owner, sandboxed, acme):
    Grant.objects.create(tenant=acme, agent_role="support", skill_pattern="support.*")
    response = client_for(owner).post(try_url(), {"arguments": GOOD, "role": "support"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["outcome"] == "ok"
    assert body["result"] == {"message_id": "msg_sandbox", "sent_at": "2026-12-01T09:00:00+00:00"}
    assert body["target"] == "python:trials_test.sandbox_send_email"
    assert body["tenant"] == "acme"
    # external calls default to a person's confirmation
    assert body["verdict"] == "confirm"
    assert body["why"]["decision"]["rule_id"] == "default:external"
    assert body["why"]["validation"] == {"passed": True}
    assert body["span"]["attempts"][0]["number"] == 1
    assert len(SANDBOX_CALLS) == 1
    assert demo_tools.outbox() == []  # the real send_email was not called
    # a try is no run: nothing reaches the skill's production calls, spans or figures
    assert (Run.objects.count(), ToolCall.objects.count(), Span.objects.count()) == (0, 0, 0)
    recorded = SkillTry.objects.get()
    assert (recorded.tried_by, recorded.via, recorded.outcome) == (owner, "api", "ok")


def test_a_destructive_draft_without_a_sandbox_cannot_be_tried(owner_team):
    erasure = manifest(
        "admin.erase_user",
        risk={"effect": "destructive", "data_classification": "restricted", "approval": "two_person"},
        execution__adapter="python:demo.delete_user_permanently",
    )
    author = make_user("dev", tenant=None)
    platform = Team.objects.create(slug="developer-platform", name="Dev platform")
    platform.members.add(author)
    skill = Skill.objects.create(
        skill_id="skl_admin_erase_user", name="admin.erase_user", namespace="admin", owner_team=platform
    )
    SkillVersion.objects.create(
        skill=skill,
        version="1.0.0",
        major=1,
        minor=0,
        patch=0,
        manifest=erasure,
        effect="destructive",
        data_classification="restricted",
        description="x" * 30,
    )
    response = client_for(author).post(
        try_url(name="admin.erase_user"), {"arguments": {"user_id": "usr_ada100"}}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "not_triable"
    assert "destructive" in error["message"] and "execution.sandbox" in error["message"]
    assert demo_tools._state["deleted"] == []
    assert SkillTry.objects.count() == 0


def test_a_read_without_a_sandbox_is_tried_against_its_real_target_as_the_verdict_allows(owner, granted):
    services.create_draft_version(manifest=manifest(), author=owner)
    url, arguments = try_url(name="docs.search_documentation"), {"query": "rate limits"}
    response = client_for(owner).post(url, {"arguments": arguments, "role": "support"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["target"] == "python:demo.search_documentation"
    assert body["why"]["target"]["reason"] == "read_without_sandbox"
    assert body["verdict"] == "allow" and body["outcome"] == "ok"
    assert "results" in body["result"]
    unchosen = client_for(owner).post(url, {"arguments": arguments}, format="json").json()
    assert unchosen["verdict"] == "" and unchosen["outcome"] == "not_run"  # no role, no verdict: nothing runs


class Counting(BaseHTTPRequestHandler):
    hits: dict[str, int] = {}

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["Content-Length"]))
        Counting.hits[self.path] = Counting.hits.get(self.path, 0) + 1
        payload = json.dumps({"message_id": f"msg_{self.path.strip('/')}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def downstream():
    Counting.hits = {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_an_http_sandbox_is_called_and_the_real_service_counts_zero(owner, granted, downstream, settings):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = True
    body = email_manifest(execution__adapter=f"{downstream}/real", execution__sandbox=f"{downstream}/sandbox")
    body["execution"]["credential"] = "mailer"  # never attached to a sandbox call
    services.create_draft_version(manifest=body, author=owner)
    for _ in range(3):
        response = client_for(owner).post(try_url(), {"arguments": GOOD, "role": "support"}, format="json")
        assert response.json()["result"] == {"message_id": "msg_sandbox"}
    assert Counting.hits == {"/sandbox": 3}


def test_malformed_arguments_get_the_validation_error_not_a_500(owner, sandboxed):
    client = client_for(owner)
    bad = client.post(try_url(), {"arguments": {**GOOD, "to": "not an address", "cc": 1}}, format="json")
    assert bad.status_code == 201
    body = bad.json()
    assert body["outcome"] == "invalid"
    assert body["result"]["error"]["class"] == "validation"
    assert {f["field"] for f in body["why"]["validation"]["fields"]} == {"to", "(arguments)"}
    not_an_object = client.post(try_url(), {"arguments": ["a", "list"]}, format="json")
    assert not_an_object.json()["outcome"] == "invalid"
    missing = client.post(try_url(), {"role": "support"}, format="json")
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "invalid_try"
    bad_role = client.post(try_url(), {"arguments": GOOD, "role": "Robert'); DROP"}, format="json")
    assert bad_role.status_code == 400
    assert SANDBOX_CALLS == []


def test_the_verdict_is_for_the_chosen_role_and_only_in_the_owners_tenants(owner, sandboxed, globex):
    client = client_for(owner)
    denied = client.post(try_url(), {"arguments": GOOD, "role": "marketing"}, format="json").json()
    assert denied["verdict"] == "deny" and denied["why"]["decision"]["rule_id"] == "role_not_allowed"
    ungranted = client.post(try_url(), {"arguments": GOOD, "role": "support"}, format="json").json()
    assert ungranted["verdict"] == "deny" and ungranted["why"]["decision"]["rule_id"] == "no_grant"
    # another tenant's grants and policies are not the owner's to probe
    other = client.post(try_url(), {"arguments": GOOD, "role": "support", "tenant": globex.slug}, format="json")
    assert other.status_code == 404


def test_another_team_cannot_try_or_read_the_tries(owner, granted, sandboxed, acme, client):
    client_for(owner).post(try_url(), {"arguments": GOOD, "role": "support"}, format="json")
    stranger = make_user("stranger", tenant=acme)
    Team.objects.create(slug="billing-platform", name="Billing").members.add(stranger)
    api = client_for(stranger)
    assert api.post(try_url(), {"arguments": GOOD}, format="json").status_code == 403
    assert api.get(reverse("runs_api:version_tries", args=["support.notify_customer", "1.0.0"])).status_code == 403
    login(client, stranger)
    assert client.get(reverse("trials:try", args=["support.notify_customer", "1.0.0"])).status_code == 403
    run = client.post(reverse("trials:run", args=["support.notify_customer", "1.0.0"]), {"arguments": "{}"})
    assert run.status_code == 403
    assert client.post(reverse("trials:tests", args=["support.notify_customer", "1.0.0"])).status_code == 403
    missing = client.get(reverse("trials:try", args=["support.no_such_skill", "1.0.0"]))
    assert missing.status_code == 404
    assert SkillTry.objects.count() == 1 and len(SANDBOX_CALLS) == 1


def test_owners_see_the_tries_on_the_version_page(owner, granted, sandboxed, client):
    login(client, owner)
    url = reverse("trials:run", args=["support.notify_customer", "1.0.0"])
    response = client.post(url, {"arguments": json.dumps(GOOD), "role": "support"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert b"msg_sandbox" in response.content and b'data-try="why"' in response.content
    broken = client.post(url, {"arguments": "{not json", "role": "support"})
    assert broken.status_code == 400 and b"Enter a valid JSON" in broken.content
    page = client.get(reverse("trials:try", args=["support.notify_customer", "1.0.0"]))
    assert page.status_code == 200
    assert page.content.count(b"python:trials_test.sandbox_send_email") >= 2
    assert b"owner" in page.content  # who tried


def test_a_sandbox_is_held_to_the_same_rules_at_draft(owner, settings):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    cases = {
        "python:demo.delete_user_permanently": {"function_not_for_team", "sandbox_needs_approval", "not_a_sandbox"},
        "python:demo.create_refund_request": {"function_not_for_team", "sandbox_needs_approval", "not_a_sandbox"},
        "python:demo.update_ticket_status": {"not_a_sandbox"},  # a production writer is never a sandbox
        "python:demo.sandbox_refund_request": {"function_not_for_team", "not_a_sandbox"},  # another's stand-in
        "python:demo.no_such_function": {"unknown_function"},
        "http://169.254.169.254/latest/meta-data": {"sandbox_egress_refused"},
        "http://127.0.0.1:8000/sandbox": {"sandbox_egress_refused"},
        "python:demo.send_email": {
            "sandbox_is_target",
        },
    }
    for sandbox, codes in cases.items():
        with pytest.raises(services.ManifestInvalid) as refused:
            services.create_draft_version(manifest=email_manifest(execution__sandbox=sandbox), author=owner)
        assert {e["code"] for e in refused.value.errors} == codes, sandbox
        assert all(e["path"] == "$.execution.sandbox" for e in refused.value.errors)


def test_a_teammate_outside_the_tenant_sees_the_try_without_its_verdict(owner, granted, sandboxed, owner_team, globex):
    client_for(owner).post(try_url(), {"arguments": GOOD, "role": "support"}, format="json")
    teammate = make_user("teammate", tenant=globex)
    owner_team.members.add(teammate)
    listed = client_for(teammate).get(reverse("runs_api:version_tries", args=["support.notify_customer", "1.0.0"]))
    assert listed.status_code == 200
    [row] = listed.json()
    assert row["tenant"] == "acme" and row["verdict"] == "" and "decision" not in row["why"]
    assert row["result"]["message_id"] == "msg_sandbox"  # the sandbox's answer is the team's own
