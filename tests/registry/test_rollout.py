"""Staged rollout through the real gate: canary tenants, a share of runs, promote and rollback.

Runs start and call over the API (the test client through the real gate path, on PostgreSQL and Redis), and
the version each call answers with is the one the stage chose.
"""

import uuid

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_agent
from registry.models import Rollout, RolloutEvent, RolloutState, Snapshot
from registry.services import approve_version
from registry.snapshots import index_for, latest_index, latest_snapshot
from registry.stages import Audience, share_point
from tests.conftest import make_user
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

SKILL = "orders.echo"
# What publishing asks of a draft's manifest that the gate tests' factory does not bother with.
STRICT = {"adapter": "python:test.echo", "schema": {"type": "object", "properties": {}, "additionalProperties": False}}


@pytest.fixture
def versions(acme, globex, owner_team):
    """orders.echo 1.0.0 (everyone's) and 1.1.0 (published, to be staged), granted in both tenants."""
    old = make_skill(SKILL, adapter="python:test.echo", publish=False)
    new = make_skill(SKILL, adapter="python:test.echo", version="1.1.0", publish=False)
    for tenant in (acme, globex):
        grant(tenant, "orders.*")
    return old, new


def owner_api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def agent_api(tenant, name: str) -> APIClient:
    _, key = create_agent(tenant=tenant, name=name, role="support")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def rollout_url(action: str, version: str = "1.1.0") -> str:
    return reverse(f"registry_api:version-{action}", args=[SKILL, version])


def served(client: APIClient, run_id: str, call_id: str) -> str:
    response = post_calls(client, run_id, [call(call_id, SKILL)])
    assert response.status_code == 200, response.content
    [result] = response.json()["results"]
    assert result["status"] == "ok", result
    return result["skill"]["version"]


def test_a_canary_tenant_gets_the_staged_version_and_no_other_tenant_does(versions, owner, acme, globex):
    response = owner_api(owner).post(rollout_url("rollout"), {"tenants": ["globex"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() | {"snapshot": 0} == {
        "name": SKILL,
        "version": "1.1.0",
        "state": "staged",
        "status": "active",
        "baseline": "1.0.0",
        "tenants": ["globex"],
        "percent": None,
        "snapshot": 0,
    }
    canary, other = agent_api(globex, "globex-bot"), agent_api(acme, "acme-bot")
    for n in range(5):
        assert served(canary, start_run(canary)["run_id"], f"c{n}") == "1.1.0"
        assert served(other, start_run(other)["run_id"], f"c{n}") == "1.0.0"
    # Asking for the staged version by number does not get round the stage.
    run = start_run(other)
    result = post_calls(other, run["run_id"], [call("pin", SKILL, version="1.1.0")]).json()["results"][0]
    assert result["status"] == "error" and result["error"]["code"] == "unknown_skill"
    # The signed snapshot each agent loads carries its tenant's version, and never the stage itself.
    for client, version in ((canary, "1.1.0"), (other, "1.0.0")):
        body = client.get(reverse("registry_api:snapshot-latest")).json()["snapshot"]
        assert [(s["name"], s["version"]) for s in body["skills"] if s["name"] == SKILL] == [(SKILL, version)]
        assert "rollouts" not in body and "globex" not in str(body["skills"])


def test_percent_splits_runs_within_five_points_and_keeps_each_run_on_one_version(versions, owner, acme):
    response = owner_api(owner).post(rollout_url("rollout"), {"percent": 30}, format="json")
    assert response.status_code == 200, response.content
    index = latest_index()
    # 2,000 runs through the one rule the gate resolves with (registry.stages via SnapshotIndex.resolve).
    run_ids = [uuid.uuid4() for _ in range(2000)]
    chosen = [index.resolve(SKILL, audience=Audience(tenant_id=acme.pk, run_key=str(run_id))) for run_id in run_ids]
    staged_share = sum(skill.version == "1.1.0" for skill in chosen) / len(chosen)
    assert 0.25 <= staged_share <= 0.35, staged_share
    # Through the real gate: each run answers every call with one version, the one the rule derives.
    client = agent_api(acme, "acme-bot")
    seen = set()
    for _ in range(40):
        run_id = start_run(client)["run_id"]
        first, second = served(client, run_id, "a"), served(client, run_id, "b")
        expected = "1.1.0" if share_point(str(uuid.UUID(run_id)), SKILL, "1.1.0") < 3000 else "1.0.0"
        assert first == second == expected
        seen.add(first)
    assert seen == {"1.0.0", "1.1.0"}


def test_widening_the_share_keeps_runs_that_were_inside_inside(versions, owner, acme):
    api = owner_api(owner)
    api.post(rollout_url("rollout"), {"percent": 10}, format="json")
    narrow = latest_index()
    api.post(rollout_url("rollout"), {"percent": 50}, format="json")
    wide = latest_index()
    for _ in range(500):
        audience = Audience(tenant_id=acme.pk, run_key=str(uuid.uuid4()))
        if narrow.resolve(SKILL, audience=audience).version == "1.1.0":
            assert wide.resolve(SKILL, audience=audience).version == "1.1.0"


def test_rollback_takes_effect_on_the_next_new_run_and_a_pinned_run_keeps_its_version(versions, owner, globex):
    api = owner_api(owner)
    api.post(rollout_url("rollout"), {"tenants": ["globex"]}, format="json")
    canary = agent_api(globex, "globex-bot")
    running = start_run(canary)["run_id"]
    assert served(canary, running, "before") == "1.1.0"
    untouched = start_run(canary)["run_id"]  # started before the rollback, no call yet
    response = api.post(rollout_url("rollback"))
    assert response.status_code == 200 and response.json()["state"] == "rolled_back"
    assert served(canary, start_run(canary)["run_id"], "after") == "1.0.0"
    # Runs pinned to the snapshot they started with keep their version, as every snapshot change does.
    assert served(canary, running, "later") == "1.1.0"
    assert served(canary, untouched, "first") == "1.1.0"


def test_promote_gives_everyone_the_version_from_the_next_run(versions, owner, acme, globex):
    api = owner_api(owner)
    api.post(rollout_url("rollout"), {"tenants": ["globex"]}, format="json")
    assert api.post(rollout_url("promote")).json()["state"] == "promoted"
    other = agent_api(acme, "acme-bot")
    assert served(other, start_run(other)["run_id"], "c") == "1.1.0"
    assert [e.action for e in RolloutEvent.objects.order_by("pk")] == ["rollout", "promote"]
    assert latest_index().rollouts() == []


def test_rollback_of_the_version_everyone_is_on_brings_back_the_one_below(versions, owner, acme):
    assert owner_api(owner).post(rollout_url("rollback")).status_code == 200
    client = agent_api(acme, "acme-bot")
    assert served(client, start_run(client)["run_id"], "c") == "1.0.0"
    event = RolloutEvent.objects.get()
    assert (event.action, event.version, event.baseline, event.actor) == ("rollback", "1.1.0", "1.0.0", owner)
    assert event.snapshot_number == Snapshot.objects.latest().number


def test_every_change_is_audited_with_who_what_and_when(versions, owner, globex):
    api = owner_api(owner)
    api.post(rollout_url("rollout"), {"tenants": ["globex"]}, format="json")
    api.post(rollout_url("rollout"), {"percent": 20}, format="json")
    api.post(rollout_url("rollback"))
    events = list(RolloutEvent.objects.order_by("pk").values_list("action", "tenants", "percent", "actor__username"))
    assert events == [
        ("rollout", ["globex"], None, "owner"),
        ("rollout", [], 20, "owner"),
        ("rollback", [], None, "owner"),
    ]
    assert Rollout.objects.get().state == RolloutState.ROLLED_BACK


def _reaches_anyone_outside(version: str, tenant, since: int) -> bool:
    """Whether any snapshot published after `since` gave `version` to `tenant` (no run, or any of 200 runs)."""
    for snapshot in Snapshot.objects.filter(number__gt=since):
        index = index_for(snapshot)
        audiences = [Audience(tenant_id=tenant.pk)] + [
            Audience(tenant_id=tenant.pk, run_key=str(uuid.uuid4())) for _ in range(200)
        ]
        for audience in audiences:
            resolved = index.resolve(SKILL, audience=audience)
            if resolved is not None and resolved.version == version:
                return True
    return False


def test_a_draft_published_straight_into_a_stage_never_reaches_anyone_else(versions, owner, acme, globex):
    make_skill(SKILL, version="1.2.0", status="draft", publish=False, **STRICT)
    before = latest_snapshot().number
    response = owner_api(owner).post(
        rollout_url("rollout", "1.2.0"), {"tenants": ["globex"], "publish": True}, format="json"
    )
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["state"], response.json()["baseline"]) == (
        "active",
        "staged",
        "1.1.0",
    )
    assert not _reaches_anyone_outside("1.2.0", acme, before)
    canary = agent_api(globex, "globex-bot")
    assert served(canary, start_run(canary)["run_id"], "c") == "1.2.0"


def test_a_draft_that_needs_review_enters_its_stage_when_approved(versions, owner, acme, globex, owner_team):
    draft = make_skill(SKILL, version="1.2.0", status="draft", publish=False, **STRICT)
    draft.manifest = {**draft.manifest, "risk": {**draft.manifest["risk"], "effect": "write"}}
    draft.effect = "write"
    draft.save()
    before = latest_snapshot().number
    response = owner_api(owner).post(rollout_url("rollout", "1.2.0"), {"percent": 40, "publish": True}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["state"]) == ("in_review", "staged")
    reviewer = make_user("reviewer")
    owner_team.members.add(reviewer)
    draft.refresh_from_db()
    assert Snapshot.objects.latest().number == before + 1  # the stage's own record; 1.2.0 is in no snapshot yet
    assert "1.2.0" not in [entry["version"] for entry in latest_index().skills]
    approve_version(version=draft, user=reviewer)
    index = latest_index()
    assert index.resolve(SKILL, audience=Audience(tenant_id=acme.pk)).version == "1.1.0"
    shares = [index.resolve(SKILL, audience=Audience(acme.pk, str(uuid.uuid4()))).version for _ in range(1000)]
    assert 0.35 <= shares.count("1.2.0") / 1000 <= 0.45
