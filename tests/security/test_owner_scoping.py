"""Skill owners see only the tenants they belong to, written as the attack.

An owner of `support.lookup` who belongs to acme only tries to learn about globex, a tenant whose
agents also call the skill: its end users (by probing them one prefix at a time with a simulated
or shadow rule), its tasks (trace titles) and its agents' search words (discovery misses). Each
test shows the page gives them nothing that changes with the probe, and, as the control, that a
person who does belong to globex sees it.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.models import Membership, Role
from console.services import create_agent
from policies import services as policies
from policies.models import Scope
from registry.models import DiscoveryQuery
from runs.models import ToolCall
from tests.conftest import make_user
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, rule
from traces.models import Alert, AlertRule, Span, Trace

pytestmark = pytest.mark.django_db

SKILL = "support.lookup"
GLOBEX_END_USERS = ["anna@globex.example", "alex@globex.example", "bert@globex.example"]
GLOBEX_TASK = "GLOBEX-PRIVATE: refund the order of Anna Schmidt"
ACME_TASK = "acme task: reset a password"
PROBES = ["a", "an", "b", "z"]


@pytest.fixture
def globex_agent_client(globex):
    from rest_framework.test import APIClient

    _, key = create_agent(tenant=globex, name="globex-bot", role="support")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def world(acme, globex, owner, agent_client, globex_agent_client):
    """support.lookup (owned by `owner`'s team) called in acme once and in globex for three end users."""
    grant(acme, "support.*")
    grant(globex, "support.*")
    make_skill(SKILL, adapter="python:test.echo")  # publishes a snapshot with the grants
    run = start_run(agent_client, end_user="acme-carol", task=ACME_TASK)
    post_calls(agent_client, run["run_id"], [call("acme-1", SKILL, {"q": "x"})])
    return {"owner": owner, "globex_client": globex_agent_client, "acme_client": agent_client}


def globex_calls(world) -> None:
    for index, end_user in enumerate(GLOBEX_END_USERS):
        run = start_run(world["globex_client"], end_user=end_user, task=GLOBEX_TASK)
        post_calls(world["globex_client"], run["run_id"], [call(f"gx-{index}", SKILL, {"q": end_user})])


@pytest.fixture
def owner_in_both(acme, globex, owner_team):
    """The control: an owner of the same team who does belong to globex."""
    user = make_user("owner-both", tenant=acme, roles=[Role.VIEWER])
    Membership.objects.create(tenant=globex, user=user, role=Role.VIEWER)
    owner_team.members.add(user)
    return user


def probe_rule(prefix: str) -> dict:
    return rule("probe", "deny", f'tenant.slug == "globex" && end_user.id.startsWith("{prefix}")')


def simulate_probes(client, user, policy) -> dict[str, str]:
    client.force_login(user)
    bodies = {}
    for prefix in PROBES:
        policies.save_draft(policy=policy, rules=[probe_rule(prefix)], user=user)
        response = client.post(reverse("policies:simulate", args=[policy.pk]), {"limit": "1000"})
        assert response.status_code == 200
        bodies[prefix] = response.content.decode()
    return bodies


def globex_markers() -> list[str]:
    gx_calls = list(ToolCall.objects.filter(run__tenant__slug="globex"))
    return [
        *GLOBEX_END_USERS,
        "globex.example",
        GLOBEX_TASK,
        "Globex",
        *[c.call_id for c in gx_calls],
        *[str(c.run_id) for c in gx_calls],
    ]


# --- policy simulation and shadow --------------------------------------------------------------


def test_simulating_a_prefix_probe_on_globex_end_users_learns_nothing(client, world, owner_in_both):
    globex_calls(world)
    owner = world["owner"]
    policy = policies.create_policy(name="probe", scope=Scope.SKILL, skill_name=SKILL, created_by=owner)

    bodies = simulate_probes(client, owner, policy)

    assert len(set(bodies.values())) == 1, "the simulation answer changed with the probed prefix"
    body = bodies["a"]
    assert not [m for m in globex_markers() if m in body]
    assert "acme-1" not in body  # acme's call is replayed and unchanged: no row, only the count
    simulation = policies.simulate_policy(version=policies.draft_of(policy), user=owner)
    assert [row.call.call_id for row in simulation.rows] == ["acme-1"]
    assert simulation.counts == {"unchanged": 1}
    assert simulation.not_replayed == 3  # globex's calls: counted, never evaluated
    assert "3 calls of tenants you do not belong to" in body

    # The control: a member of globex runs the same probes and sees them bite, so the test can fail.
    control = simulate_probes(client, owner_in_both, policy)
    assert control["a"] != control["z"]
    assert "allow → deny: 2" in control["a"] and "gx-0" in control["a"] and "allow → deny" not in control["z"]


def test_a_shadow_probe_lists_and_marks_no_globex_call(client, world):
    owner = world["owner"]
    policy = policies.create_policy(
        name="probe", scope=Scope.SKILL, skill_name=SKILL, created_by=owner, rules=[probe_rule("a")]
    )
    policies.publish_policy_version(version=policies.draft_of(policy), user=owner, shadow=True)
    globex_calls(world)  # the shadow rule is evaluated live on globex's calls
    assert ToolCall.objects.get(call_id="gx-0").decision["shadow"][0]["differs"] is True  # the probe did bite

    assert policies.shadow_differences(policy=policy, user=owner) == []
    client.force_login(owner)
    page = client.get(reverse("policies:policy_detail", args=[policy.pk])).content.decode()
    assert not [m for m in globex_markers() if m in page]

    trace = Trace.objects.get(run_id=ToolCall.objects.get(call_id="gx-0").run_id)
    span = Span.objects.filter(trace=trace, skill_name=SKILL, call__isnull=False).first()
    panel = client.get(reverse("traces:span", args=[trace.pk, span.span_id])).content.decode()
    assert "shadow_differs" not in panel
    why = client.get(reverse("traces:why", args=[trace.pk, span.call_id]), HTTP_HX_REQUEST="true").content.decode()
    assert "(differs)" not in why and "deny by" not in why


# --- traces: titles, task text, end users -------------------------------------------------------


def test_trace_pages_show_an_acme_owner_no_globex_task_or_end_user(client, world):
    globex_calls(world)
    client.force_login(world["owner"])
    listing = client.get(reverse("traces:list"))
    rows = listing.context["rows"]
    assert {r["trace"].tenant.slug for r in rows} == {"acme", "globex"}  # owners see their skill everywhere
    body = listing.content.decode()
    assert ACME_TASK in body  # their own tenant's titles, whole
    assert GLOBEX_TASK not in body and "Anna" not in body and not [u for u in GLOBEX_END_USERS if u in body]

    trace = Trace.objects.filter(tenant__slug="globex").first()
    detail = client.get(reverse("traces:detail", args=[trace.pk])).content.decode()
    assert GLOBEX_TASK not in detail and "Anna" not in detail
    assert not [u for u in GLOBEX_END_USERS if u in detail]
    for span in Span.objects.filter(trace=trace, skill_name=SKILL):
        panel = client.get(reverse("traces:span", args=[trace.pk, span.span_id])).content.decode()
        assert GLOBEX_TASK not in panel and not [u for u in GLOBEX_END_USERS if u in panel]


def test_filtering_traces_by_a_guessed_globex_end_user_answers_like_a_wrong_guess(client, world):
    globex_calls(world)
    client.force_login(world["owner"])
    url = reverse("traces:list")
    right = client.get(url, {"tenant": "globex", "end_user": "anna@globex.example"}).context["rows"]
    wrong = client.get(url, {"tenant": "globex", "end_user": "nobody@globex.example"}).context["rows"]
    assert right == wrong == []
    own = client.get(url, {"tenant": "acme", "end_user": "acme-carol"}).context["rows"]
    assert len(own) == 1  # the filter still works in one's own tenant


def test_skill_metrics_and_alert_pages_show_counts_not_task_text(client, world):
    globex_calls(world)
    rule_row = AlertRule.objects.create(skill_name=SKILL, kind="error_rate", threshold=0.1)
    Alert.objects.create(
        rule=rule_row,
        skill_name=SKILL,
        value=1.0,
        message=f"{SKILL}: 3 of 4 calls failed",
        dedupe_key="x",
        window_start=rule_row.created_at,
        window_end=rule_row.created_at,
        fired_at=rule_row.created_at,
    )
    client.force_login(world["owner"])
    metrics = client.get(reverse("traces:skill", args=[SKILL]))
    assert metrics.status_code == 200 and metrics.context["m"].calls == 4
    alerts = client.get(reverse("traces:alerts"))
    assert "3 of 4 calls failed" in alerts.content.decode()
    for page in (metrics, alerts):
        body = page.content.decode()
        assert GLOBEX_TASK not in body and ACME_TASK not in body
        assert not [u for u in GLOBEX_END_USERS if u in body]


# --- registry: discovery misses -----------------------------------------------------------------


@pytest.fixture
def misses(world, acme, globex):
    globex_bot = create_agent(tenant=globex, name="gx-search", role="support")[0]
    acme_bot = create_agent(tenant=acme, name="acme-search", role="support")[0]
    DiscoveryQuery.objects.create(
        query="globex secret project falcon", namespace="support", result_count=0, agent=globex_bot
    )
    DiscoveryQuery.objects.create(query="acme lost words", namespace="support", result_count=0, agent=acme_bot)


@pytest.mark.parametrize("url", [reverse("registry:catalog"), reverse("registry:skill", args=[SKILL])])
def test_registry_pages_show_search_text_only_to_the_searching_tenant(client, misses, world, viewer, outsider, url):
    client.force_login(world["owner"])
    body = client.get(url).content.decode()
    assert "acme lost words" in body
    assert "falcon" not in body
    assert "Other tenants: 1 missed search" in body  # owners: one number for all other tenants

    client.force_login(viewer)  # a member of acme in no owning team: its own tenant's words, no count
    body = client.get(url).content.decode()
    assert "acme lost words" in body and "falcon" not in body and "Other tenants" not in body

    client.force_login(outsider)  # globex's own member sees globex's words, not acme's
    body = client.get(url).content.decode()
    assert "falcon" in body and "acme lost words" not in body


def test_the_why_panel_gives_an_owner_no_globex_tool_names_or_taint_source(client, world, globex):
    run = start_run(world["globex_client"], end_user=GLOBEX_END_USERS[0], task=GLOBEX_TASK)
    world["globex_client"].post(
        reverse("runs_api:run_calls", args=[run["run_id"]]),
        {
            "exposed_tools": [SKILL, "globex.private_crm_export"],
            "calls": [call("gx-t", SKILL, {"q": "x"}, taint=f"read {GLOBEX_END_USERS[1]}'s mail")],
        },
        format="json",
    )
    trace = Trace.objects.get(run_id=run["run_id"])
    url = reverse("traces:why", args=[trace.pk, ToolCall.objects.get(call_id="gx-t").pk])
    client.force_login(world["owner"])
    why = client.get(url).content.decode()
    assert why.count('<div class="q">') == 8 and "Tainted." in why
    assert "globex.private_crm_export" not in why and not [u for u in GLOBEX_END_USERS if u in why]
    client.force_login(make_user("gx-viewer", tenant=globex, roles=[Role.VIEWER]))  # the control
    why = client.get(url).content.decode()
    assert "globex.private_crm_export" in why and GLOBEX_END_USERS[1] in why
