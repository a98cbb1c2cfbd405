"""The path × refusal matrix: every path of the decision kernel (`airlock_sdk.policy.kernel.Path`), driven
through the entry point a user, agent or worker reaches, against every refusal. A cell fails when its path
lets the refusal through: the tool runs (each tool counts its own executions), or the call is recorded as
allowed and ok (a page served, a result given back, a client's result or a job's end recorded, a try or a
manifest test calling its target, a local `allow`, an upload recorded unflagged). A confirm rule must not
run anything without a person: the gate opens an approval instead.

Each path applies the refusal at its own hardest realistic moment:
- a call proposed afresh (the REST gate, the MCP gateway, a pipeline step, a try, a manifest test, a local
  decision from the bundle fetched then): the refusal is in force before the call;
- a call decided and about to act (an approved resume, a client's result, a job's end) and a later read of
  a kept result (a page, a result given back in full): after the decision or the first call, before the act;
- an upload: the SDK decided after the refusal, under the bundle it held before it.
A version staged for another tenant cannot arrive after a decision (a run keeps the snapshot it started
with): it is in force from the start, and a decided path must not even be entered for the canary. A page and
a result given back in full are held to the skill that produced them (its grant, its role, its write in a
frozen tenant, a rule naming it): a page is a call of that skill, and describe_result gives a result back
"only while the agent may still call the skill that produced it" (4fa6425).

`NOT_APPLICABLE` lists the cells whose refusal is a fact the path does not hold, with why; each driver lists
the refusals it applies; together they cover every (path, refusal) pair exactly once. Without a refusal
every driver's call goes through, so a refused cell was refused by its refusal, which its evidence must
name (`BECAUSE`). The drivers use real services, the real API and the tools' own counts; no test double of
Airlock's code.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import pytest
from airlock_sdk.bundles import CachedBundle
from airlock_sdk.local import LocalDecider
from airlock_sdk.policy.kernel import Path
from airlock_sdk.snapshots import verify_signature
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval, resume_approval
from console.models import Agent, Tenant
from console.services import freeze_tenant, suspend_agent
from lib import signing
from mcp_gateway.calls import propose_call, start_session_run
from policies.bundles import SignedBundle, bundle_for
from policies.models import Grant
from policies.services import create_policy, publish_policy_version, revoke_grant, set_local_decisions
from registry.models import SkillVersion
from registry.rollouts import roll_out_version
from registry.snapshots import publish_snapshot
from reliability.jobs import complete_job
from reliability.models import LongJob, PipelineStep
from reliability.sagas import advance_pipeline, submit_pipeline
from runs.adapters.python import register
from runs.models import CallStatus, LocalDecision, Run, ToolCall
from runs.services import AgentSuspended, stop_run
from runs.trials import run_skill_tests, try_version
from tests.runs.conftest import post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db

ROLE, OTHER_ROLE = "support", "intern"  # every skill here is offered to support only
CANARY = "2.0.0"  # staged for globex only; 1.0.0 is everyone's version
ARGS = {"order_id": "o-1"}
RAN: Counter = Counter()  # executions, counted by the tools themselves


class Refusal(StrEnum):
    REVOKED_GRANT = "revoked_grant"
    ROLE_NOT_ALLOWED = "role_not_allowed"
    SUSPENDED_AGENT = "suspended_agent"
    FROZEN_TENANT = "frozen_tenant"  # every skill it is applied to is a write: reads run in a frozen tenant
    STOPPED_RUN = "stopped_run"
    DENY_RULE = "deny_rule"
    CONFIRM_RULE = "confirm_rule"
    STAGED_ELSEWHERE = "staged_for_another_tenant"
    EXPIRED_BUNDLE = "expired_bundle"
    NOT_OPTED_IN = "role_not_opted_in"


# What a refused cell's evidence must name: the refusal applied, not some other failure.
BECAUSE = {
    Refusal.REVOKED_GRANT: r"no_grant|grant_revoked|No grant lets",
    Refusal.ROLE_NOT_ALLOWED: r"role_not_allowed|not for agents with the role|not in decision bundle",
    Refusal.SUSPENDED_AGENT: r"agent_suspended|suspended",
    Refusal.FROZEN_TENANT: r"tenant_frozen|froze tenant|may not decide locally",
    Refusal.STOPPED_RUN: r"run_stopped|stopped this run|run_closed",
    Refusal.DENY_RULE: r"denied_by_policy|policy_changed|matrix-deny",
    Refusal.CONFIRM_RULE: r"approval_required|policy_changed|confirm",
    Refusal.STAGED_ELSEWHERE: (
        r"unknown_skill|skill_retired|no callable skill|not in decision bundle|staged for other tenants|everyone's"
    ),
    Refusal.EXPIRED_BUNDLE: r"bundle_expired|expired",
    Refusal.NOT_OPTED_IN: r"local_decisions_off|decide locally|local decisions|opted in",
}

BUNDLE_REFUSALS = frozenset({Refusal.EXPIRED_BUNDLE, Refusal.NOT_OPTED_IN})
LIVE = frozenset(Refusal) - BUNDLE_REFUSALS  # what Airlock's own rows hold: agent, run, tenant, skill, policy
# What a try and a manifest test hold: the chosen tenant's grants, freeze and policies, and the role decided for.
OWNERS = frozenset(
    {Refusal.REVOKED_GRANT, Refusal.ROLE_NOT_ALLOWED, Refusal.FROZEN_TENANT, Refusal.DENY_RULE, Refusal.CONFIRM_RULE}
)
FROM_LIVE_ROWS = (
    "only the SDK decides from a bundle (LOCAL_SDK) and only an upload is judged against one (UPLOAD_REVIEW): "
    "this path is decided by Airlock from its live rows"
)
NOT_APPLICABLE: dict[tuple[Path, Refusal], str] = {
    **{
        (path, refusal): FROM_LIVE_ROWS
        for path in set(Path) - {Path.LOCAL_SDK, Path.UPLOAD_REVIEW}
        for refusal in BUNDLE_REFUSALS
    },
    (Path.APPROVED_RESUME, Refusal.CONFIRM_RULE): "covered: the call holds a person's approval, and a confirm is no "
    "worse than the verdict approved (kernel step 9); the gate opened that approval (REST_GATE's cell)",
    (Path.LONG_JOB_END, Refusal.DENY_RULE): "no policy is judged: the job ran on the arguments the gate judged, and "
    "its end holds none (reliability.jobs.job_refusal asks runs.authorization with arguments=None, so neither the "
    "schema nor the policy). It holds the agent (revoked, suspended), the run (stopped, closed), the tenant's "
    "freeze, the version as the run resolves it and its standing, the offer and the grants: each a cell here",
    (Path.LONG_JOB_END, Refusal.CONFIRM_RULE): "no policy is judged (see its deny rule)",
    (Path.TRY, Refusal.SUSPENDED_AGENT): "no agent exists: a try decides for an agent of a role",
    (Path.TRY, Refusal.STOPPED_RUN): "no run exists",
    (Path.TRY, Refusal.STAGED_ELSEWHERE): "an owner tries their own version whatever its stage (drafts too): a "
    "stage chooses the version agents get, not what its owners may try",
    (Path.MANIFEST_TEST, Refusal.SUSPENDED_AGENT): "no agent exists, as for a try",
    (Path.MANIFEST_TEST, Refusal.STOPPED_RUN): "no run exists, as for a try",
    (Path.MANIFEST_TEST, Refusal.STAGED_ELSEWHERE): "a version's own tests run before it reaches anyone, whatever "
    "its stage, as for a try",
    (Path.LOCAL_SDK, Refusal.SUSPENDED_AGENT): "the SDK cannot know: a suspended agent is sent no bundle (403) and "
    "its last one decides until valid_until (policies/api/views.py); UPLOAD_REVIEW flags what it decided",
    (Path.LOCAL_SDK, Refusal.STOPPED_RUN): "a bundle is the agent's, not a run's: a stop reaches the SDK only "
    "through the gate, unreachable while it decides locally; UPLOAD_REVIEW flags what it decided",
}


# The tools ------------------------------------------------------------------------------------------


@register("matrix.act", effect="write")
def act(*, arguments, context):
    RAN["act"] += 1
    return {"done": True}


@register("matrix.act_sandbox", effect="read", sandbox_for="matrix.act")
def act_sandbox(*, arguments, context):
    RAN["act_sandbox"] += 1
    return {"done": False}


@register("matrix.peek", effect="read")
def peek(*, arguments, context):
    RAN["peek"] += 1
    return {"status": "open"}


@register("matrix.canary", effect="write")
def canary(*, arguments, context):
    RAN["canary"] += 1
    return {"done": True}


@register("matrix.job", effect="write")
def job(*, arguments, context):
    RAN["job"] += 1
    return {"job_id": "job-1", "status": "running"}


@register("matrix.export", effect="write")
def export(*, arguments, context):
    RAN["export"] += 1
    return [{"id": f"row-{n}", "memo": "exported " * 4} for n in range(200)]


@register("matrix.ledger", effect="write")
def ledger(*, arguments, context):
    RAN["ledger"] += 1
    return {"rows": [{"entry": f"e-{n}", "amount": n * 10, "memo": f"invoice {n}"} for n in range(60)]}


LISTED = {"output_schema": {"type": "array"}}
SKILLS: dict[str, dict] = {
    "matrix.act": {"effect": "write", "adapter": "python:matrix.act"},
    "matrix.peek": {"adapter": "python:matrix.peek"},
    "matrix.approve": {"effect": "write", "approval": "required", "adapter": "python:matrix.act"},
    "matrix.local": {"effect": "write", "adapter": "client:matrix.local"},
    "matrix.job": {"effect": "write", "adapter": "python:matrix.job"},
    "matrix.export": {
        "effect": "write",
        "adapter": "python:matrix.export",
        "result_limit_bytes": 4096,
        "extra": LISTED,
    },
    "matrix.ledger": {"effect": "write", "adapter": "python:matrix.ledger", "result_limit_bytes": 65536},
}
EXECUTION = {  # beyond what the factory's manifest holds
    "matrix.act": {"sandbox": "python:matrix.act_sandbox"},
    "matrix.job": {"job_status": "https://jobs.example/{job_id}"},
}


# The world --------------------------------------------------------------------------------------------


@dataclass
class World:
    acme: Tenant
    agent: Agent
    client: APIClient
    owner: object
    admin: object
    approver: object
    skill: str = ""  # the skill a rule names
    role: str = ROLE  # the role a try or a manifest test decides for
    run_id: str = ""

    def fresh_agent(self) -> Agent:
        return Agent.objects.select_related("tenant").get(pk=self.agent.pk)


@dataclass(frozen=True)
class Outcome:
    let_through: bool
    evidence: str


@pytest.fixture(autouse=True)
def _counted():
    RAN.clear()


@pytest.fixture
def world(acme, globex, agent, agent_client, owner, tenant_admin, approver) -> World:
    grant(acme, "matrix.*", role=ROLE)
    set_local_decisions(
        tenant=acme, agent_roles=[ROLE, OTHER_ROLE], bundle_validity=timedelta(minutes=10), by_label="t"
    )
    return World(acme=acme, agent=agent, client=agent_client, owner=owner, admin=tenant_admin, approver=approver)


def _publish(w: World, name: str, refusal: Refusal | None, **extra) -> SkillVersion:
    """Everyone's 1.0.0 of `name`; for a staged refusal also a canary 2.0.0 rolled out to globex only."""
    w.skill = name
    version = _version(name, "1.0.0", **extra)
    if refusal is Refusal.STAGED_ELSEWHERE:
        adapter = SKILLS[name]["adapter"]
        staged = _version(name, CANARY, adapter=adapter if adapter.startswith("client:") else "python:matrix.canary")
        roll_out_version(version=staged, user=w.owner, tenants=["globex"])  # publishes the snapshot
    else:
        publish_snapshot(reason="matrix")
    return version


def _version(name: str, number: str, **overrides) -> SkillVersion:
    kwargs = {**SKILLS[name], **overrides}
    version = make_skill(name, version=number, roles=[ROLE], publish=False, **kwargs)
    if name in EXECUTION:
        version.manifest["execution"].update(EXECUTION[name])
        version.save(update_fields=["manifest"])
    return version


def _rule(w: World, verdict: str) -> None:
    """The acme admin publishes a rule naming the skill, through the policy service."""
    condition = f'skill.name == "{w.skill}"'
    rules = [{"id": f"matrix-{verdict}", "verdict": verdict, "condition": condition, "reason": f"matrix: {verdict}"}]
    policy = create_policy(name=f"matrix {verdict}", scope="tenant", tenant=w.acme, created_by=w.admin, rules=rules)
    publish_policy_version(version=policy.versions.get(), user=w.admin)


def _apply(w: World, refusal: Refusal | None) -> None:
    """The refusal, applied as a person applies it (a stage and a bundle's expiry are the drivers' own)."""
    if refusal is Refusal.REVOKED_GRANT:
        for covering in Grant.objects.filter(tenant=w.acme, agent_role=ROLE, revoked_at=None):
            revoke_grant(grant=covering, revoked_by=w.admin)
    elif refusal is Refusal.ROLE_NOT_ALLOWED:  # a platform admin changes the agent's role (the Django admin)
        Agent.objects.filter(pk=w.agent.pk).update(role=OTHER_ROLE)
        w.role = OTHER_ROLE
    elif refusal is Refusal.SUSPENDED_AGENT:
        suspend_agent(agent=w.fresh_agent(), by=w.admin, reason="matrix: looping")
    elif refusal is Refusal.FROZEN_TENANT:
        freeze_tenant(tenant=w.acme, by=w.admin, reason="matrix: incident")
    elif refusal is Refusal.STOPPED_RUN:
        stop_run(run=Run.objects.get(pk=w.run_id), by=w.approver, reason="matrix: runaway")
    elif refusal is Refusal.DENY_RULE:
        _rule(w, "deny")
    elif refusal is Refusal.CONFIRM_RULE:
        _rule(w, "confirm")
    elif refusal is Refusal.NOT_OPTED_IN:
        set_local_decisions(tenant=w.acme, agent_roles=[], bundle_validity=timedelta(minutes=10), by_label="t")


def _call(call_id: str, name: str, refusal: Refusal | None, **extra) -> dict:
    version = {"version": CANARY} if refusal is Refusal.STAGED_ELSEWHERE else {}
    return {"call_id": call_id, "name": name, "arguments": dict(ARGS), **version, **extra}


def _ran() -> int:
    return sum(RAN.values())


def _said(result: dict) -> str:
    """What a call's result says, as evidence."""
    error = result.get("error") or {}
    return f"{result.get('status')} {error.get('code', '')}: {error.get('message', '')}".strip()


def _one(response) -> dict:
    """The batch's one result, or the whole request's refusal as one."""
    body = response.json()
    return body["results"][0] if "results" in body else {"status": "error", "error": body.get("error") or body}


def _proposed(w: World, name: str, refusal: Refusal | None, **start) -> dict:
    _publish(w, name, refusal)
    w.run_id = start_run(w.client, **start)["run_id"]
    return _one(post_calls(w.client, w.run_id, [_call("c1", name, refusal)]))


# The drivers: one per path ----------------------------------------------------------------------------


def rest_gate(w: World, refusal: Refusal | None) -> Outcome:
    _publish(w, "matrix.act", refusal)
    w.run_id = start_run(w.client)["run_id"]
    _apply(w, refusal)
    before = _ran()
    result = _one(post_calls(w.client, w.run_id, [_call("c1", "matrix.act", refusal)]))
    return Outcome(result["status"] == "ok" or _ran() > before, _said(result))


def mcp_gateway(w: World, refusal: Refusal | None) -> Outcome:
    _publish(w, "matrix.act", refusal)
    run_id = start_session_run(agent=w.agent, end_user="u-1", task="matrix")
    w.run_id = str(run_id)
    _apply(w, refusal)
    before = _ran()  # the agent as /mcp authenticates it, for this request
    result = propose_call(agent=w.fresh_agent(), run_id=run_id, call=_call("c1", "matrix.act", refusal))
    return Outcome(result["status"] == "ok" or _ran() > before, _said(result))


def pipeline_step(w: World, refusal: Refusal | None) -> Outcome:
    """A step names no version: a staged refusal holds when the step runs everyone's, never the canary."""
    _publish(w, "matrix.act", refusal)
    w.run_id = start_run(w.client)["run_id"]
    steps = [{"step_id": "s1", "name": "matrix.act", "arguments": dict(ARGS)}]
    pipeline, _ = submit_pipeline(run=Run.objects.get(pk=w.run_id), pipeline_id="p1", steps=steps)
    _apply(w, refusal)
    before = _ran()
    advance_pipeline(pipeline_pk=pipeline.pk)
    receipt = PipelineStep.objects.get(pipeline=pipeline).receipt or {}
    if refusal is Refusal.STAGED_ELSEWHERE:
        call = ToolCall.objects.select_related("skill_version").filter(run_id=w.run_id).first()
        version = call.skill_version.version if call and call.skill_version else ""
        return Outcome(RAN["canary"] > 0 or version == CANARY, f"{_said(receipt)}; ran {version}, everyone's")
    return Outcome(receipt.get("status") == "ok" or _ran() > before, _said(receipt))


def approved_resume(w: World, refusal: Refusal | None) -> Outcome:
    """Approved through the decide service; the refusal lands before the queued resume task runs."""
    proposed = _proposed(w, "matrix.approve", refusal)
    if proposed["status"] != "approval_required":  # the canary: refused before any approval opened
        return Outcome(proposed["status"] == "ok" or _ran() > 0, _said(proposed))
    approval = ApprovalRequest.objects.get(pk=proposed["approval_id"])
    decide_approval(approval=approval, user=w.approver, decision="approve")  # its resume is queued on commit
    _apply(w, refusal)
    try:
        resume_approval(approval_id=approval.pk)  # what the queued resume task does
        held = ""
    except AgentSuspended as exc:
        held = f"held: {exc}"
    approval.refresh_from_db()
    call = ToolCall.objects.get(pk=approval.call_id)
    done = approval.status == ApprovalStatus.EXECUTED or call.status == CallStatus.SUCCEEDED
    return Outcome(done or _ran() > 0, held or _said(approval.outcome or call.result or {}))


def client_result(w: World, refusal: Refusal | None) -> Outcome:
    """The gate issues the token; the refusal lands; the agent's SDK posts its result to the API."""
    issued = _proposed(w, "matrix.local", refusal)
    if issued["status"] != "execute_locally":  # the canary: no token to run it with
        return Outcome(issued["status"] == "ok", _said(issued))
    _apply(w, refusal)
    response = w.client.post(
        reverse("runs_api:client_result", args=[w.run_id, "c1"]),
        {"token": issued["token"], "content": {"done": True}},
        format="json",
    )
    call = ToolCall.objects.get(run_id=w.run_id, call_id="c1")
    answer = response.json()
    said = _said(answer) if "status" in answer else _said({"status": "error", **answer})
    return Outcome(call.status == CallStatus.SUCCEEDED or answer.get("status") == "ok", said)


def long_job_end(w: World, refusal: Refusal | None) -> Outcome:
    """The write starts a job; the refusal lands; the job's end is delivered (its callback's service)."""
    accepted = _proposed(w, "matrix.job", refusal)
    started = LongJob.objects.filter(run_id=w.run_id).first()
    if started is None:  # the canary: no job was started for it
        return Outcome(accepted["status"] == "ok" or _ran() > 0, _said(accepted))
    _apply(w, refusal)
    complete_job(job=started, succeeded=True, content={"rows": 3})
    delivered = ToolCall.objects.get(run_id=w.run_id, call_id="c1").result or {}
    return Outcome(delivered.get("status") == "ok" and delivered.get("content") == {"rows": 3}, _said(delivered))


def result_page(w: World, refusal: Refusal | None) -> Outcome:
    """A write's result cut into pages and kept; the next page is asked for after the refusal (the canary's
    page names the canary version)."""
    _publish(w, "matrix.export", refusal)
    w.run_id = start_run(w.client)["run_id"]
    first = _one(post_calls(w.client, w.run_id, [_call("c1", "matrix.export", None)]))
    assert first["status"] == "ok" and first.get("next"), first
    _apply(w, refusal)
    before = _ran()
    page = _one(post_calls(w.client, w.run_id, [{**_call("p1", "matrix.export", refusal), "page": first["next"]}]))
    return Outcome(page["status"] == "ok" or _ran() > before, _said(page))


def describe_result(w: World, refusal: Refusal | None) -> Outcome:
    """A run over its context budget: the older result is replaced by a ref, given back in full after the
    refusal. A rule names the skill that produced it. The canary's call is refused, and its ref with it."""
    _publish(w, "matrix.ledger", refusal)
    w.run_id = start_run(w.client, context_budget=100)["run_id"]
    calls = [_call("c1", "matrix.ledger", refusal), _call("c2", "matrix.ledger", None)]
    first = post_calls(w.client, w.run_id, calls).json()["results"][0]
    if refusal is not Refusal.STAGED_ELSEWHERE:
        assert first.get("context_replaced"), first
    ref = f"res_{ToolCall.objects.get(run_id=w.run_id, call_id='c1').pk}"
    _apply(w, refusal)
    described = _one(
        post_calls(w.client, w.run_id, [{"call_id": "d1", "name": "describe_result", "arguments": {"ref": ref}}])
    )
    return Outcome(described["status"] == "ok", f"{_said(described)} (c1: {_said(first)})")


def _tried_skill(w: World, refusal: Refusal | None, **extra) -> SkillVersion:
    """A write tried against its registered sandbox; a confirm runs against a sandbox by design, so its cell
    tries a read, whose try calls its real target."""
    return _publish(w, "matrix.peek" if refusal is Refusal.CONFIRM_RULE else "matrix.act", None, **extra)


def try_(w: World, refusal: Refusal | None) -> Outcome:
    version = _tried_skill(w, refusal)
    _apply(w, refusal)
    tried = try_version(version=version, user=w.owner, arguments=dict(ARGS), role=w.role, tenant="acme", via="api")
    decision = tried.why.get("decision") or {}
    said = f"{tried.outcome} {tried.error_code} {tried.verdict} {decision.get('rule_id')}: {tried.result}"
    return Outcome(_ran() > 0, said)


def manifest_test(w: World, refusal: Refusal | None) -> Outcome:
    w.skill = "matrix.peek" if refusal is Refusal.CONFIRM_RULE else "matrix.act"
    _apply(w, refusal)  # first: the test names the role it decides for
    tests = [{"name": "as acme's agent", "arguments": dict(ARGS), "role": w.role, "tenant": "acme"}]
    version = _tried_skill(w, refusal, extra={"tests": tests})
    tested = run_skill_tests(version=version, trigger="publish", user=w.owner)
    return Outcome(_ran() > 0, str(tested.results))


def _bundle(w: World) -> SignedBundle:
    signed = bundle_for(w.fresh_agent())
    verify_signature(signed.body, signed.signature, signing.public_key_pem(), kind="decision bundle")
    return signed


def local_sdk(w: World, refusal: Refusal | None) -> Outcome:
    """The SDK fetched its bundle after the refusal and decides from it while Airlock is unreachable (past its
    valid_until for an expired bundle; both unversioned and naming the canary for a staged one)."""
    _publish(w, "matrix.local", refusal)
    _apply(w, refusal)
    signed = _bundle(w)
    bundle = CachedBundle(number=signed.body["number"], body=signed.body, signature=signed.signature)
    now = bundle.valid_until + timedelta(seconds=1) if refusal is Refusal.EXPIRED_BUNDLE else None
    versions = [None, CANARY] if refusal is Refusal.STAGED_ELSEWHERE else [None]
    decider, said, let = LocalDecider(), [], False
    for version in versions:
        verdict = decider.decide(
            bundle,
            name="matrix.local",
            version=version,
            arguments=dict(ARGS),
            run_tainted=False,
            taint_source="",
            end_user="u-1",
            end_user_roles=[],
            now=now,
        )
        chosen = (verdict.skill or {}).get("version")
        let = let or (verdict.verdict == "allow" and (refusal is not Refusal.STAGED_ELSEWHERE or chosen == CANARY))
        said.append(f"{version}: {verdict.verdict} {chosen} {(verdict.error or {}).get('code')} {verdict.reason}")
    return Outcome(let, "; ".join(said))


def upload_review(w: World, refusal: Refusal | None) -> Outcome:
    """The SDK held a bundle, Airlock became unreachable, the refusal landed, the SDK decided and ran the call,
    and uploads it now. An expired bundle's call was decided past its valid_until; a role not opted in decided
    under the bundle that said so; the canary's call names the canary."""
    validity = timedelta(seconds=30) if refusal is Refusal.EXPIRED_BUNDLE else timedelta(minutes=10)
    set_local_decisions(tenant=w.acme, agent_roles=[ROLE, OTHER_ROLE], bundle_validity=validity, by_label="t")
    _publish(w, "matrix.local", refusal)
    w.run_id = start_run(w.client)["run_id"]
    signed = _bundle(w)
    _apply(w, refusal)
    if refusal is Refusal.NOT_OPTED_IN:
        signed = _bundle(w)
        assert signed.body["local_decisions"] is False
    decided = timezone.now() + timedelta(seconds=1)  # after the refusal, within the allowed clock skew
    if refusal is Refusal.EXPIRED_BUNDLE:
        decided = datetime.fromisoformat(signed.body["valid_until"]) + timedelta(seconds=1)
    spooled = {
        "call_id": "l-1",
        "skill": "matrix.local",
        "version": CANARY if refusal is Refusal.STAGED_ELSEWHERE else "1.0.0",
        "arguments": dict(ARGS),
        "verdict": "allow",
        "reason": "allowed by bundle",
        "bundle_number": signed.body["number"],
        "decided_at": decided.isoformat(),
        "status": "succeeded",
        "result": {"done": True},
        "error": None,
        "finished_at": (decided + timedelta(milliseconds=40)).isoformat(),
        "sequence": 1,
    }
    response = w.client.post(reverse("runs_api:local_calls", args=[w.run_id]), {"calls": [spooled]}, format="json")
    answer = _one(response)
    local = LocalDecision.objects.filter(call__run_id=w.run_id, call__call_id="l-1").first()
    if local is None:
        return Outcome(False, f"refused: {_said(answer)}")
    return Outcome(not local.flagged, f"recorded, flagged {local.flagged}: {local.flag_verdict} {local.flag_reason}")


Driver = Callable[[World, Refusal | None], Outcome]
DRIVERS: dict[Path, tuple[Driver, frozenset[Refusal]]] = {
    Path.REST_GATE: (rest_gate, LIVE),
    Path.MCP_GATEWAY: (mcp_gateway, LIVE),
    Path.PIPELINE_STEP: (pipeline_step, LIVE),
    Path.APPROVED_RESUME: (approved_resume, LIVE - {Refusal.CONFIRM_RULE}),
    Path.CLIENT_RESULT: (client_result, LIVE),
    Path.LONG_JOB_END: (long_job_end, LIVE - {Refusal.DENY_RULE, Refusal.CONFIRM_RULE}),
    Path.RESULT_PAGE: (result_page, LIVE),
    Path.DESCRIBE_RESULT: (describe_result, LIVE),
    Path.TRY: (try_, OWNERS),
    Path.MANIFEST_TEST: (manifest_test, OWNERS),
    Path.LOCAL_SDK: (local_sdk, frozenset(Refusal) - {Refusal.SUSPENDED_AGENT, Refusal.STOPPED_RUN}),
    Path.UPLOAD_REVIEW: (upload_review, frozenset(Refusal)),
}
CELLS = [(path, refusal) for path, (_, applies) in DRIVERS.items() for refusal in Refusal if refusal in applies]


def test_the_drivers_and_the_table_cover_every_path_and_refusal_exactly_once():
    assert set(DRIVERS) == set(Path), "every path of the kernel has a driver here"
    for path, (_, applies) in DRIVERS.items():
        not_applicable = {refusal for (where, refusal) in NOT_APPLICABLE if where == path}
        assert not applies & not_applicable, f"{path}: both applied and not applicable: {applies & not_applicable}"
        assert applies | not_applicable == set(Refusal), f"{path}: neither: {set(Refusal) - applies - not_applicable}"
    assert len(CELLS) + len(NOT_APPLICABLE) == len(Path) * len(Refusal)
    assert all(reason.strip() for reason in NOT_APPLICABLE.values())


@pytest.mark.parametrize("path", list(Path), ids=str)
def test_without_a_refusal_every_path_lets_its_call_through(world, path):
    drive, _ = DRIVERS[path]
    outcome = drive(world, None)
    assert outcome.let_through, f"{path} refused its call with no refusal applied: {outcome.evidence}"


@pytest.mark.parametrize(("path", "refusal"), CELLS, ids=[f"{path}-{refusal}" for path, refusal in CELLS])
def test_no_path_lets_a_refusal_through(world, path, refusal):
    drive, _ = DRIVERS[path]
    outcome = drive(world, refusal)
    assert not outcome.let_through, f"{path} let {refusal} through: {outcome.evidence}"
    assert re.search(BECAUSE[refusal], outcome.evidence, re.IGNORECASE), (
        f"{path} refused, but not for {refusal}: {outcome.evidence}"
    )
