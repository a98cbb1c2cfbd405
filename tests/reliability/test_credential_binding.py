"""Credentials are bound by their tenant: only tenant admins say which skills and endpoints may use one.

Checked at execution (the prepare hook, before any request): outside a binding the call fails as
`authorization/credential_not_bound` and the downstream hears nothing. Binding changes are
audited, append-only, and shown to the tenant's admins only.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.models import Role
from reliability.models import CredentialAudit, CredentialBinding
from reliability.services import bind_credential, delete_credential, save_credential, unbind_credential
from tests.conftest import make_user
from tests.reliability.conftest import bind, gate, publish, skill

pytestmark = pytest.mark.django_db
SECRET = "acme-helpdesk-secret-77"


@pytest.fixture
def helpdesk(world, flaky):
    skill("helpdesk.get_ticket", f"{flaky.url}/ticket", credential="helpdesk_token")
    publish()
    save_credential(tenant=world["acme"], name="helpdesk_token", value=SECRET)
    return flaky


def call(world, name="helpdesk.get_ticket") -> dict:
    return gate(world["agent"], [{"call_id": "c1", "name": name, "arguments": {}}])[1][0]


def test_unbound_credential_fails_typed_and_sends_nothing(world, helpdesk):
    result = call(world)
    assert (result["error"]["class"], result["error"]["code"]) == ("authorization", "credential_not_bound")
    assert "helpdesk_token" in result["error"]["message"] and SECRET not in str(result)
    assert sum(helpdesk.hits.values()) == 0


@pytest.mark.parametrize(
    ("pattern", "endpoint", "sent"),
    [
        ("helpdesk.get_ticket", "{url}", True),
        ("helpdesk.*", "{url}/any/path?x=1", True),  # a URL is cut to its origin
        ("helpdesk.list_tickets", "{url}", False),  # another skill
        ("support.*", "{url}", False),  # another namespace
        ("helpdesk.*", "http://127.0.0.2:{port}", False),  # another host
        ("helpdesk.*", "https://127.0.0.1:{port}", False),  # another scheme
    ],
    ids=["exact skill", "namespace", "other skill", "other namespace", "other host", "other scheme"],
)
def test_a_binding_covers_its_skill_pattern_at_its_endpoint_only(world, helpdesk, pattern, endpoint, sent):
    port = helpdesk.url.rsplit(":", 1)[1]
    bind(world["acme"], "helpdesk_token", pattern, endpoint.format(url=helpdesk.url, port=port))
    result = call(world)
    assert (result["status"] == "ok") is sent, result
    assert helpdesk.auth == ([f"Bearer {SECRET}"] if sent else [])


def test_user_info_in_the_adapter_does_not_borrow_a_bound_host(world, flaky):
    """`http://<bound host>@<other host>` goes to the other host: the binding of the first does not apply."""
    port = flaky.url.rsplit(":", 1)[1]
    skill("helpdesk.get_ticket", f"http://127.0.0.2:{port}@127.0.0.1:{port}/ticket", credential="helpdesk_token")
    publish()
    save_credential(tenant=world["acme"], name="helpdesk_token", value=SECRET)
    bind(world["acme"], "helpdesk_token", "helpdesk.*", f"http://127.0.0.2:{port}")
    assert call(world)["error"]["code"] == "credential_not_bound"
    assert flaky.auth == []


def test_another_tenants_binding_does_not_count(world, helpdesk, globex):
    save_credential(tenant=globex, name="helpdesk_token", value="globex")
    bind(globex, "helpdesk_token", "helpdesk.*", helpdesk.url)
    assert call(world)["error"]["code"] == "credential_not_bound"


def test_unbinding_stops_the_next_call(world, helpdesk):
    bind(world["acme"], "helpdesk_token", "helpdesk.*", helpdesk.url)
    assert call(world)["status"] == "ok"
    unbind_credential(binding=CredentialBinding.objects.get(), user=None)
    assert call(world)["error"]["code"] == "credential_not_bound"
    assert len(helpdesk.auth) == 1


def test_bindings_are_audited_append_only(world, helpdesk, tenant_admin):
    binding = bind_credential(
        tenant=world["acme"],
        credential_name="helpdesk_token",
        skill_pattern="helpdesk.*",
        endpoint=f"{helpdesk.url}/ticket",
        user=tenant_admin,
    )
    assert binding.endpoint == helpdesk.url
    unbind_credential(binding=binding, user=tenant_admin)
    rows = list(CredentialAudit.objects.filter(action__in=["bound", "unbound"]).order_by("at", "id"))
    assert [(r.action, r.actor_label, r.detail["skill_pattern"], r.detail["endpoint"]) for r in rows] == [
        ("bound", "admin", "helpdesk.*", helpdesk.url),
        ("unbound", "admin", "helpdesk.*", helpdesk.url),
    ]
    with pytest.raises(ValueError):
        rows[0].save()
    with pytest.raises(ValueError):
        rows[0].delete()


def test_deleting_the_last_credential_of_a_name_removes_its_bindings(world, helpdesk):
    bind(world["acme"], "helpdesk_token", "helpdesk.*", helpdesk.url)
    credential = world["acme"].credentials.get()
    delete_credential(credential=credential, user=None)
    assert not CredentialBinding.objects.exists()
    assert CredentialAudit.objects.filter(action="unbound", detail__note="the credential was deleted").exists()


def test_a_member_who_is_not_admin_cannot_bind_through_the_service(world, helpdesk, viewer):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        bind_credential(
            tenant=world["acme"],
            credential_name="helpdesk_token",
            skill_pattern="helpdesk.*",
            endpoint=helpdesk.url,
            user=viewer,
        )


# --- the credentials page ---------------------------------------------------------------------------------


@pytest.fixture
def globex_world(globex):
    """globex's credential, bound to globex's CRM, and gina, globex's admin."""
    gina = make_user("gina", tenant=globex, roles=[Role.ADMIN, Role.VIEWER])
    credential = save_credential(tenant=globex, name="crm_token", value="globex-secret", user=gina)
    binding = bind_credential(
        tenant=globex,
        credential_name="crm_token",
        skill_pattern="customer.read_profile",
        endpoint="https://crm.globex.example",
        user=gina,
    )
    return {"gina": gina, "credential": credential, "binding": binding, "tenant": globex}


def test_the_admin_binds_and_sees_bindings_and_history(client, globex_world):
    client.force_login(globex_world["gina"])
    url = reverse("reliability:credential_bind", args=["globex", globex_world["credential"].pk])
    response = client.post(url, {"skill_pattern": "customer.*", "endpoint": "https://crm.globex.example:8443/v2"})
    assert response.status_code == 302
    assert CredentialBinding.objects.filter(skill_pattern="customer.*", endpoint="https://crm.globex.example:8443")
    page = client.get(reverse("reliability:credential_list", args=["globex"])).content.decode()
    assert "customer.read_profile" in page and "https://crm.globex.example:8443" in page
    assert page.count("gina") >= 3  # bound by, in the history (saved, bound, bound)
    assert "globex-secret" not in page


@pytest.mark.parametrize(
    ("pattern", "endpoint"),
    [("*", "https://crm.globex.example"), ("customer.*", "crm.globex.example"), ("customer.*", "client:notes")],
)
def test_a_binding_names_a_skill_or_namespace_and_a_real_endpoint(client, globex_world, pattern, endpoint):
    client.force_login(globex_world["gina"])
    url = reverse("reliability:credential_bind", args=["globex", globex_world["credential"].pk])
    response = client.post(url, {"skill_pattern": pattern, "endpoint": endpoint})
    assert response.status_code == 400
    assert CredentialBinding.objects.count() == 1


def test_bind_refuses_get(client, globex_world):
    client.force_login(globex_world["gina"])
    url = reverse("reliability:credential_bind", args=["globex", globex_world["credential"].pk])
    assert client.get(url).status_code == 405


def test_acme_admin_can_neither_see_nor_bind_nor_unbind_globex_credentials(client, globex_world, tenant_admin):
    client.force_login(tenant_admin)  # admin of acme only
    credential, binding = globex_world["credential"], globex_world["binding"]
    assert client.get(reverse("reliability:credential_list", args=["globex"])).status_code == 404
    for slug in ("globex", "acme"):  # the other tenant's slug, or its own slug with globex's ids
        bind_url = reverse("reliability:credential_bind", args=[slug, credential.pk])
        assert (
            client.post(bind_url, {"skill_pattern": "customer.*", "endpoint": "https://evil.example"}).status_code
            == 404
        )
        unbind_url = reverse("reliability:credential_unbind", args=[slug, binding.pk])
        assert client.post(unbind_url).status_code == 404
    acme_page = client.get(reverse("reliability:credential_list", args=["acme"])).content.decode()
    assert "crm_token" not in acme_page and "crm.globex.example" not in acme_page
    assert list(CredentialBinding.objects.values_list("endpoint", flat=True)) == ["https://crm.globex.example"]


def test_a_member_without_the_admin_role_gets_403(client, globex_world, globex):
    member = make_user("gus", tenant=globex, roles=[Role.APPROVER, Role.VIEWER])
    client.force_login(member)
    credential, binding = globex_world["credential"], globex_world["binding"]
    assert client.get(reverse("reliability:credential_list", args=["globex"])).status_code == 403
    assert (
        client.post(
            reverse("reliability:credential_bind", args=["globex", credential.pk]),
            {"skill_pattern": "customer.*", "endpoint": "https://evil.example"},
        ).status_code
        == 403
    )
    assert client.post(reverse("reliability:credential_unbind", args=["globex", binding.pk])).status_code == 403
    assert CredentialBinding.objects.count() == 1


def test_the_admin_unbinds_from_the_page(client, globex_world):
    client.force_login(globex_world["gina"])
    response = client.post(reverse("reliability:credential_unbind", args=["globex", globex_world["binding"].pk]))
    assert response.status_code == 302 and not CredentialBinding.objects.exists()
    assert CredentialAudit.objects.filter(action="unbound", actor=globex_world["gina"]).exists()


def test_the_page_lists_skills_asking_for_the_credential_and_whether_they_are_bound(client, globex_world):
    skill("customer.read_profile", "https://crm.globex.example/profile", credential="crm_token")
    skill("customer.export_all", "http://127.0.0.1:9/collect", credential="crm_token")
    client.force_login(globex_world["gina"])
    page = client.get(reverse("reliability:credential_list", args=["globex"])).content.decode()
    requests = page[page.index('data-requests="crm_token"') :]
    export, profile = requests.index("customer.export_all"), requests.index("customer.read_profile")
    assert "not bound" in requests[export:profile] and "http://127.0.0.1:9" in requests[export:profile]
    assert "Bind to" not in page  # no one-click binding of whatever a manifest asks for
    assert ">bound<" in requests[profile:]
