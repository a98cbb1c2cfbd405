"""Staged rollout, attacked: members of other teams, tenants looking for other canaries, malformed stages,
and a promote racing a rollback."""

import threading

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from console.models import Role, Team, Tenant
from registry import rollouts
from registry.models import Rollout, RolloutEvent, Snapshot
from registry.snapshots import latest_index
from tests.conftest import login, make_user
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db

SKILL = "orders.echo"


@pytest.fixture
def versions(acme, globex, owner_team):
    old = make_skill(SKILL, adapter="python:test.echo", publish=False)
    new = make_skill(SKILL, adapter="python:test.echo", version="1.1.0", publish=False)
    draft = make_skill(SKILL, adapter="python:test.echo", version="1.2.0", status="draft", publish=False)
    for tenant in (acme, globex):
        grant(tenant, "orders.*")
    return old, new, draft


@pytest.fixture
def other_team_member(acme):
    """An admin of the skill's own canary tenant who belongs to another team."""
    user = make_user("other-team", tenant=acme, roles=[Role.ADMIN, Role.VIEWER])
    Team.objects.create(slug="billing-tools", name="Billing tools").members.add(user)
    return user


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def url(action: str, version: str = "1.1.0", *, console: bool = False) -> str:
    if console:
        return reverse(f"registry:{action}", args=[SKILL, version])
    return reverse(f"registry_api:version-{action}", args=[SKILL, version])


def test_a_member_of_another_team_can_neither_roll_out_promote_nor_roll_back(
    versions, owner, other_team_member, outsider, client
):
    rollouts.roll_out_version(version=versions[1], user=owner, tenants=["acme"])
    before = (Snapshot.objects.count(), RolloutEvent.objects.count())
    for stranger in (other_team_member, outsider):
        for action, body in (("rollout", {"percent": 50}), ("promote", {}), ("rollback", {})):
            response = api(stranger).post(url(action), body, format="json")
            assert response.status_code == 403 and response.json()["error"]["class"] == "authorization"
            login(client, stranger)
            assert client.post(url(action, console=True), body).status_code == 403
    assert (Snapshot.objects.count(), RolloutEvent.objects.count()) == before
    assert Rollout.objects.get().state == "staged" and Rollout.objects.get().percent is None
    assert api(owner).get(url("promote")).status_code == 405


def test_the_console_buttons_work_for_the_owner_with_a_clear_message(versions, owner, client):
    login(client, owner)
    response = client.post(url("rollout", console=True), {"tenants": "acme", "percent": ""}, follow=True)
    assert "Rolled out orders.echo@1.1.0 to acme; everyone else stays on 1.0.0." in response.content.decode()
    response = client.post(url("promote", console=True), follow=True)
    assert "Promoted orders.echo@1.1.0: every new run gets it." in response.content.decode()
    response = client.post(url("rollout", console=True), {"tenants": "", "percent": "150"}, follow=True)
    assert "percent must be a whole number from 1 to 99" in response.content.decode()


def test_a_tenant_never_learns_which_other_tenants_are_canaries(versions, owner, viewer, outsider, client):
    Tenant.objects.create(slug="initech", name="Initech")
    rollouts.roll_out_version(version=versions[1], user=owner, tenants=["globex", "initech"])
    for stranger in (viewer, outsider):
        login(client, stranger)
        for page in (reverse("registry:skill", args=[SKILL]), reverse("registry:catalog")):
            html = client.get(page).content.decode()
            assert "1.1.0" in html and "2 canary tenants" in html
            assert "initech" not in html.lower()
            assert "Promote" not in html and "Roll back" not in html and "Rollout history" not in html
            if stranger is viewer:  # of acme, not a canary: names no canary at all
                assert "globex" not in html.lower()
    login(client, owner)
    html = client.get(reverse("registry:skill", args=[SKILL])).content.decode()
    assert "globex, initech" in html and "Promote" in html and "Roll back" in html


def test_the_agents_snapshot_never_carries_the_stage(versions, owner, outsider_agent_client):
    rollouts.roll_out_version(version=versions[1], user=owner, tenants=["acme"])
    body = outsider_agent_client.get(reverse("registry_api:snapshot-latest")).json()["snapshot"]
    assert "rollouts" not in body and "acme" not in str(body)


@pytest.mark.parametrize(
    "body,code",
    [
        ({"percent": 0}, "invalid_percent"),
        ({"percent": 100}, "invalid_percent"),
        ({"percent": 150}, "invalid_percent"),
        ({"percent": "x"}, "invalid_percent"),
        ({"percent": True}, "invalid_percent"),
        ({"percent": 12.5}, "invalid_percent"),
        ({"tenants": ["nope"]}, "unknown_tenant"),
        ({"tenants": []}, "invalid_tenants"),
        ({"tenants": "acme"}, "invalid_tenants"),
        ({"tenants": ["acme"], "percent": 10}, "invalid_stage"),
        ({}, "invalid_stage"),
    ],
)
def test_a_malformed_stage_is_a_typed_400_and_changes_nothing(versions, owner, body, code):
    before = (Snapshot.objects.count(), RolloutEvent.objects.count(), Rollout.objects.count())
    response = api(owner).post(url("rollout"), body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["class"] == "validation" and response.json()["error"]["code"] == code
    assert (Snapshot.objects.count(), RolloutEvent.objects.count(), Rollout.objects.count()) == before


def test_only_a_published_newest_version_with_one_below_can_be_staged(versions, owner):
    owner_client = api(owner)
    response = owner_client.post(url("rollout", "1.2.0"), {"percent": 10}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "not_published"
    response = owner_client.post(url("rollout", "1.0.0"), {"percent": 10}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "not_newest"
    assert owner_client.post(url("promote")).json()["error"]["code"] == "not_staged"
    assert owner_client.post(url("rollout", "9.9.9"), {"percent": 10}, format="json").status_code == 404


def test_a_first_version_cannot_be_staged_nor_rolled_back(owner, acme):
    make_skill("orders.lonely", adapter="python:test.echo")
    lonely = reverse("registry_api:version-rollout", args=["orders.lonely", "1.0.0"])
    response = api(owner).post(lonely, {"percent": 10}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "no_baseline"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_promote_racing_a_rollback_ends_in_one_consistent_state(versions, owner):
    rollouts.roll_out_version(version=versions[1], user=owner, tenants=["acme"])
    barrier, outcomes = threading.Barrier(2), {}

    def attempt(name, change):
        barrier.wait()
        try:
            change(version=versions[1], user=owner)
            outcomes[name] = "done"
        except rollouts.RolloutRefused as exc:
            outcomes[name] = exc.code
        finally:
            connection.close()

    threads = [
        threading.Thread(target=attempt, args=("promote", rollouts.promote_version)),
        threading.Thread(target=attempt, args=("rollback", rollouts.roll_back_version)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert outcomes["rollback"] == "done"  # after a promote or instead of it, a rollback always applies
    assert outcomes["promote"] in ("done", "not_staged")
    final = Rollout.objects.get()
    assert final.state == "rolled_back"
    assert [(e["version"], e["state"]) for e in latest_index().rollouts()] == [("1.1.0", "rolled_back")]
    actions = list(RolloutEvent.objects.order_by("pk").values_list("action", "snapshot_number"))
    expected = ["rollout", "promote", "rollback"] if outcomes["promote"] == "done" else ["rollout", "rollback"]
    assert [action for action, _ in actions] == expected
    assert [number for _, number in actions] == sorted({number for _, number in actions})
