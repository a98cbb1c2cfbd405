"""Console views of grants and policies: happy path, wrong method, outsider 404, member without role 403."""

import pytest
from django.urls import reverse

from policies import services
from policies.models import Grant, Policy, PolicyTest, Scope, VersionStatus
from tests.conftest import login
from tests.runs.factories import grant, make_skill, rule, tenant_policy

pytestmark = pytest.mark.django_db


# Grants -------------------------------------------------------------------------------------------


def test_grant_create_happy_path(client, acme, tenant_admin, agent):
    make_skill("billing.create_refund_request")
    login(client, tenant_admin)
    response = client.post(
        reverse("policies:grant_create", args=["acme"]),
        {"skill_pattern": "billing.*", "agent_role": "support", "oauth_scopes": "b a"},
    )
    assert response.status_code == 302
    created = Grant.objects.get()
    assert (created.skill_pattern, created.oauth_scopes, created.granted_by) == ("billing.*", ["a", "b"], tenant_admin)
    page = client.get(reverse("policies:grant_list", args=["acme"]))
    assert b"billing.*" in page.content and b"Revoke" in page.content


def test_grant_create_rejects_bad_pattern(client, acme, tenant_admin):
    login(client, tenant_admin)
    response = client.post(
        reverse("policies:grant_create", args=["acme"]), {"skill_pattern": "billing.*.x", "agent_role": "support"}
    )
    assert response.status_code == 400 and not Grant.objects.exists()


def test_grant_revoke_happy_path(client, acme, tenant_admin):
    created = grant(acme, "docs.*")
    login(client, tenant_admin)
    response = client.post(reverse("policies:grant_revoke", args=["acme", created.pk]), {"reason": "not needed"})
    assert response.status_code == 302
    created.refresh_from_db()
    assert created.revoked_at is not None and created.revoked_by == tenant_admin


@pytest.mark.parametrize("url_name,method", [("grant_list", "post"), ("grant_create", "get")])
def test_grant_views_wrong_method(client, acme, tenant_admin, url_name, method):
    login(client, tenant_admin)
    assert getattr(client, method)(reverse(f"policies:{url_name}", args=["acme"])).status_code == 405


@pytest.mark.parametrize("url_name", ["grant_list", "grant_create"])
def test_grant_views_for_outsider_and_member_without_role(client, acme, outsider, viewer, url_name):
    method = "get" if url_name == "grant_list" else "post"
    login(client, outsider)
    assert getattr(client, method)(reverse(f"policies:{url_name}", args=["acme"])).status_code == 404
    login(client, viewer)
    assert getattr(client, method)(reverse(f"policies:{url_name}", args=["acme"])).status_code == 403


def test_grant_revoke_forbidden_for_viewer(client, acme, viewer):
    created = grant(acme, "docs.*")
    login(client, viewer)
    assert client.post(reverse("policies:grant_revoke", args=["acme", created.pk])).status_code == 403
    assert Grant.objects.get().revoked_at is None


def test_grants_api_for_admin_with_token(acme, tenant_admin):
    from rest_framework.test import APIClient

    from console.services import create_personal_token

    _, key = create_personal_token(user=tenant_admin, name="bot")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    created = api.post(
        reverse("policies_api:tenant_grants", args=["acme"]),
        {"skill_pattern": "orders.*", "agent_role": "support"},
        format="json",
    )
    assert created.status_code == 201 and created.json()["granted_by"] == "admin"
    listed = api.get(reverse("policies_api:tenant_grants", args=["acme"])).json()["results"]
    assert [g["skill_pattern"] for g in listed] == ["orders.*"]
    revoked = api.post(reverse("policies_api:grant_revoke", args=[created.json()["id"]]))
    assert revoked.status_code == 200 and revoked.json()["is_active"] is False


def test_grants_api_refuses_agents(agent_client, acme):
    assert agent_client.get(reverse("policies_api:tenant_grants", args=["acme"])).status_code == 403


# Policies -----------------------------------------------------------------------------------------


def test_policy_create_and_edit_draft(client, acme, tenant_admin):
    login(client, tenant_admin)
    response = client.post(
        reverse("policies:policy_create"), {"name": "Guardrails", "scope": "tenant", "tenant": "acme"}
    )
    policy = Policy.objects.get()
    assert response.status_code == 302 and policy.tenant == acme
    saved = client.post(
        reverse("policies:draft_save", args=[policy.pk]),
        {
            "rule_id": ["mail", ""],
            "verdict": ["confirm", "allow"],
            "condition": ['skill.name == "support.send_email"', ""],
            "reason": ["ask first", ""],
        },
    )
    assert saved.status_code == 302
    assert services.draft_of(policy).rules == [
        {"id": "mail", "verdict": "confirm", "condition": 'skill.name == "support.send_email"', "reason": "ask first"}
    ]
    page = client.get(reverse("policies:policy_detail", args=[policy.pk]))
    assert page.status_code == 200 and b"support.send_email" in page.content


def test_draft_with_errors_is_shown_inline(client, acme, tenant_admin):
    policy = tenant_policy(acme)
    login(client, tenant_admin)
    response = client.post(
        reverse("policies:draft_save", args=[policy.pk]),
        {"rule_id": ["x"], "verdict": ["deny"], "condition": ["args.to.endsWith("], "reason": ["r"]},
    )
    assert response.status_code == 400 and b"Syntax error" in response.content


def test_condition_check_partial_for_htmx(client, tenant_admin):
    login(client, tenant_admin)
    bad = client.post(reverse("policies:condition_check"), {"condition": "1 + 'a' == 2"}, HTTP_HX_REQUEST="true")
    assert b"Type error" in bad.content and b"<html" not in bad.content
    good = client.post(reverse("policies:condition_check"), {"condition": "run.tainted"}, HTTP_HX_REQUEST="true")
    assert b"valid" in good.content


def test_condition_check_uses_the_row_that_triggered(client, tenant_admin):
    login(client, tenant_admin)
    response = client.post(
        reverse("policies:condition_check"),
        {"condition": ["run.tainted", "args.x ==", ""]},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TRIGGER="cond-1",
    )
    assert b"Syntax error" in response.content


def test_simulate_partial(client, acme, tenant_admin):
    policy = tenant_policy(acme, [rule("d", "deny")])
    login(client, tenant_admin)
    response = client.post(reverse("policies:simulate", args=[policy.pk]), {"limit": "50"})
    assert response.status_code == 200 and b"recorded calls replayed" in response.content


def test_publish_shadow_and_enforce_and_rollback(client, acme, tenant_admin):
    policy = tenant_policy(acme, [rule("d", "deny")])
    login(client, tenant_admin)
    client.post(reverse("policies:publish", args=[policy.pk]), {"mode": "shadow"})
    assert policy.versions.get().status == VersionStatus.SHADOW
    services.save_draft(policy=policy, rules=[rule("a", "allow")], user=tenant_admin)
    client.post(reverse("policies:publish", args=[policy.pk]), {"mode": "enforce"})
    assert {v.number: v.status for v in policy.versions.all()} == {1: "superseded", 2: "published"}
    first = policy.versions.get(number=1)
    assert client.post(reverse("policies:rollback", args=[policy.pk, first.pk])).status_code == 302
    assert policy.versions.get(number=3).rules == first.rules


def test_publish_refused_by_failing_test_shows_message(client, acme, tenant_admin):
    policy = tenant_policy(acme, [rule("d", "deny")])
    PolicyTest.objects.create(policy=policy, name="reads allowed", call={}, expected_verdict="allow")
    login(client, tenant_admin)
    response = client.post(reverse("policies:publish", args=[policy.pk]), {"mode": "enforce"}, follow=True)
    assert b"Publishing refused" in response.content
    assert policy.versions.get().status == VersionStatus.DRAFT


def test_test_add(client, acme, tenant_admin):
    policy = tenant_policy(acme)
    login(client, tenant_admin)
    client.post(
        reverse("policies:test_add", args=[policy.pk]),
        {"name": "t", "call": '{"run": {"tainted": true}}', "expected_verdict": "allow"},
    )
    assert PolicyTest.objects.get().call == {"run": {"tainted": True}}


POLICY_POSTS = ["draft_save", "simulate", "publish", "test_add"]


@pytest.mark.parametrize("url_name", POLICY_POSTS)
def test_policy_posts_wrong_method(client, acme, tenant_admin, url_name):
    policy = tenant_policy(acme)
    login(client, tenant_admin)
    assert client.get(reverse(f"policies:{url_name}", args=[policy.pk])).status_code == 405


@pytest.mark.parametrize("url_name", POLICY_POSTS + ["policy_detail"])
def test_policy_views_outsider_404_member_without_role_403(client, acme, outsider, viewer, url_name):
    policy = tenant_policy(acme)
    method = "get" if url_name == "policy_detail" else "post"
    login(client, outsider)
    assert getattr(client, method)(reverse(f"policies:{url_name}", args=[policy.pk])).status_code == 404
    login(client, viewer)
    assert getattr(client, method)(reverse(f"policies:{url_name}", args=[policy.pk])).status_code == 403


def test_skill_policy_editable_by_owning_team_only(client, acme, owner, tenant_admin):
    make_skill("support.send_note", adapter="python:test.echo")
    login(client, owner)
    client.post(
        reverse("policies:policy_create"), {"name": "note rules", "scope": "skill", "skill_name": "support.send_note"}
    )
    policy = Policy.objects.get(scope=Scope.SKILL)
    assert client.get(reverse("policies:policy_detail", args=[policy.pk])).status_code == 200
    login(client, tenant_admin)  # a tenant admin is not the skill's owner
    assert client.get(reverse("policies:policy_detail", args=[policy.pk])).status_code == 403
    assert (
        client.post(
            reverse("policies:policy_create"), {"name": "x", "scope": "skill", "skill_name": "support.send_note"}
        ).status_code
        == 403
    )


def test_platform_policy_only_for_platform_admins(client, tenant_admin, platform_admin):
    login(client, tenant_admin)
    assert client.post(reverse("policies:policy_create"), {"name": "x", "scope": "platform"}).status_code == 403
    login(client, platform_admin)
    assert client.post(reverse("policies:policy_create"), {"name": "x", "scope": "platform"}).status_code == 302


def test_policy_list_shows_only_editable(client, acme, globex, tenant_admin):
    tenant_policy(acme)
    other = tenant_policy(globex)
    other.name = "globex secret rules"
    other.save()
    login(client, tenant_admin)
    page = client.get(reverse("policies:policy_list"))
    assert b"tenant rules" in page.content and b"globex secret" not in page.content


def test_policy_page_query_count(client, acme, tenant_admin, django_assert_max_num_queries):
    policy = tenant_policy(acme, [rule(f"r{i}", "allow", f"args.n == {i}") for i in range(20)])
    for i in range(5):
        PolicyTest.objects.create(policy=policy, name=f"t{i}", call={}, expected_verdict="allow")
    login(client, tenant_admin)
    client.get(reverse("policies:policy_detail", args=[policy.pk]))
    with django_assert_max_num_queries(20):
        assert client.get(reverse("policies:policy_detail", args=[policy.pk])).status_code == 200
