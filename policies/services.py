"""Use cases of the policies app: grants, policy drafts, tests, publication, shadow, rollback, simulation.

Every change that runtimes must see (grants, published and shadow versions) publishes a new
registry snapshot in the same transaction.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from console.models import Tenant
from policies import engine, hooks
from policies.models import (
    Grant,
    GrantAction,
    GrantEvent,
    LocalDecisionSettings,
    Policy,
    PolicyTest,
    PolicyVersion,
    Scope,
    VersionStatus,
)
from registry.snapshots import latest_snapshot, publish_snapshot


class PolicyError(Exception):
    """A refused policy operation, with a message for the person who asked."""


class RulesInvalid(PolicyError):
    def __init__(self, problems: dict[int, list[str]]) -> None:
        self.problems = problems
        super().__init__(
            "Some rules have errors: "
            + "; ".join(f"rule {index + 1}: {' '.join(errors)}" for index, errors in problems.items())
        )


def _publish_snapshot(reason: str) -> None:
    publish_snapshot(reason=reason)


# Grants -------------------------------------------------------------------------------------------


def create_grant(
    *,
    tenant: Tenant,
    skill_pattern: str,
    agent_role: str,
    granted_by,
    oauth_scopes: list[str] | None = None,
    expires_at: datetime | None = None,
) -> Grant:
    with transaction.atomic():
        grant = Grant.objects.create(
            tenant=tenant,
            skill_pattern=skill_pattern.strip(),
            agent_role=agent_role.strip(),
            oauth_scopes=sorted(set(oauth_scopes or [])),
            expires_at=expires_at,
            granted_by=granted_by,
        )
        _record_grant_event(grant, GrantAction.GRANTED, actor=granted_by)
        _publish_snapshot(f"grant {grant.skill_pattern} to {tenant.slug}/{grant.agent_role}")
    return grant


def revoke_grant(*, grant: Grant, revoked_by, reason: str = "") -> Grant:
    """Revoke the grant once; the change log records who, when and why (a second revocation records nothing)."""
    with transaction.atomic():
        updated = Grant.objects.filter(pk=grant.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=revoked_by
        )
        grant.refresh_from_db()
        if updated:
            _record_grant_event(grant, GrantAction.REVOKED, actor=revoked_by, reason=reason)
            _publish_snapshot(f"revoke grant {grant.skill_pattern} from {grant.tenant.slug}/{grant.agent_role}")
    return grant


def _record_grant_event(grant: Grant, action: str, *, actor, reason: str = "") -> GrantEvent:
    return GrantEvent.objects.create(
        tenant_id=grant.tenant_id,
        grant=grant,
        grant_ref=grant.pk,
        action=action,
        skill_pattern=grant.skill_pattern,
        agent_role=grant.agent_role,
        reason=reason.strip()[:500],
        actor=actor if actor is not None and actor.is_authenticated else None,
        actor_label=actor.get_username() if actor is not None and actor.is_authenticated else "system",
        detail={
            "oauth_scopes": list(grant.oauth_scopes),
            "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
        },
    )


# Policies -----------------------------------------------------------------------------------------


def can_edit_policy(user, policy: Policy) -> bool:
    return Policy.objects.editable_by(user).filter(pk=policy.pk).exists()


def create_policy(
    *,
    name: str,
    scope: str,
    created_by,
    tenant: Tenant | None = None,
    skill_name: str = "",
    rules: list[dict] | None = None,
) -> Policy:
    if scope == Scope.TENANT and tenant is None:
        raise PolicyError("A tenant policy needs a tenant.")
    if scope == Scope.SKILL and not skill_name:
        raise PolicyError("A skill policy needs a skill name.")
    problems = engine.check_rules(rules, scope=scope) if rules else {}
    if problems:
        raise RulesInvalid(problems)
    with transaction.atomic():
        policy = Policy.objects.create(
            name=name,
            scope=scope,
            tenant=tenant if scope == Scope.TENANT else None,
            skill_name=skill_name if scope == Scope.SKILL else "",
            created_by=created_by,
        )
        PolicyVersion.objects.create(policy=policy, number=1, rules=rules or [], created_by=created_by)
    return policy


def draft_of(policy: Policy) -> PolicyVersion | None:
    return policy.versions.filter(status=VersionStatus.DRAFT).order_by("-number").first()


def _next_number(policy: Policy) -> int:
    return (policy.versions.aggregate(top=Max("number"))["top"] or 0) + 1


def save_draft(*, policy: Policy, rules: list[dict], user) -> PolicyVersion:
    """Store the rules as the policy's draft (creating a new draft after a publication)."""
    problems = engine.check_rules(rules, scope=policy.scope)
    if problems:
        raise RulesInvalid(problems)
    clean = [
        {
            "id": str(r["id"]).strip(),
            "verdict": r["verdict"],
            "condition": r["condition"].strip(),
            "reason": r["reason"].strip(),
            **({"override_taint": True} if r.get("override_taint") else {}),
        }
        for r in rules
    ]
    with transaction.atomic():
        draft = draft_of(policy)
        if draft is None:
            draft = PolicyVersion.objects.create(
                policy=policy, number=_next_number(policy), rules=clean, created_by=user
            )
        else:
            draft.rules = clean
            draft.save(update_fields=["rules"])
    return draft


@dataclass
class TestOutcome:
    test: PolicyTest
    verdict: str
    rule_id: str
    passed: bool


def run_policy_tests(*, version: PolicyVersion) -> list[TestOutcome]:
    """Each test's call evaluated against this version alone (plus the defaults by effect)."""
    compiled = compiled_policy(version, cache=False)
    outcomes = []
    for test in version.policy.tests.all():
        call = dict(test.call)
        approval_required = bool(call.pop("approval_required", False))
        decision = engine.evaluate(
            context=engine.sample_context(**call), policies=[compiled], approval_required=approval_required
        )
        outcomes.append(
            TestOutcome(
                test=test,
                verdict=decision.verdict,
                rule_id=decision.rule_id,
                passed=decision.verdict == test.expected_verdict,
            )
        )
    return outcomes


def add_policy_test(*, policy: Policy, name: str, call: dict, expected_verdict: str, user) -> PolicyTest:
    return PolicyTest.objects.create(
        policy=policy, name=name, call=call, expected_verdict=expected_verdict, created_by=user
    )


def publish_policy_version(*, version: PolicyVersion, user, shadow: bool = False, reason: str = "") -> PolicyVersion:
    """Publish a draft (enforced), or as shadow (evaluated and recorded, never enforced).
    Refused while a policy test fails or a rule has errors."""
    if version.status != VersionStatus.DRAFT:
        raise PolicyError("Only a draft can be published; edit to create a new draft.")
    problems = engine.check_rules(version.rules, scope=version.policy.scope)
    if problems:
        raise RulesInvalid(problems)
    failing = [o for o in run_policy_tests(version=version) if not o.passed]
    if failing:
        raise PolicyError(
            "Publishing refused: failing tests: "
            + ", ".join(f"{o.test.name} (expected {o.test.expected_verdict}, got {o.verdict})" for o in failing)
        )
    status = VersionStatus.SHADOW if shadow else VersionStatus.PUBLISHED
    with transaction.atomic():
        version.policy.versions.filter(status=status).update(status=VersionStatus.SUPERSEDED)
        if not shadow:  # an enforced publication ends the shadow trial as well
            version.policy.versions.filter(status=VersionStatus.SHADOW).update(status=VersionStatus.SUPERSEDED)
        version.status = status
        version.published_by = user
        version.published_at = timezone.now()
        version.note = reason or version.note
        version.save(update_fields=["status", "published_by", "published_at", "note"])
        _publish_snapshot(f"{'shadow' if shadow else 'publish'} {version.policy.name} v{version.number}")
    return version


def rollback_policy(*, version: PolicyVersion, user) -> PolicyVersion:
    """Publish an earlier version's rules again, as a new version (history is never rewritten)."""
    if version.status == VersionStatus.DRAFT:
        raise PolicyError("A draft cannot be rolled back to; publish it instead.")
    with transaction.atomic():
        version.policy.versions.filter(status=VersionStatus.DRAFT).delete()
        copy = PolicyVersion.objects.create(
            policy=version.policy,
            number=_next_number(version.policy),
            rules=version.rules,
            created_by=user,
            rolled_back_from=version,
            note=f"rollback to v{version.number}",
        )
        return publish_policy_version(version=copy, user=user, reason=f"rollback to v{version.number}")


# Evaluation sets ----------------------------------------------------------------------------------


def compiled_policy(version: PolicyVersion, *, cache: bool = True) -> engine.CompiledPolicy:
    policy = version.policy
    return engine.CompiledPolicy(
        policy_id=policy.pk,
        name=policy.name,
        scope=policy.scope,
        tenant_id=policy.tenant_id,
        skill_name=policy.skill_name,
        version_id=version.pk,
        version_number=version.number,
        rules=engine.compile_rules(version.rules, version_id=version.pk if cache else None),
    )


@dataclass
class ActivePolicies:
    published: list[engine.CompiledPolicy] = field(default_factory=list)
    shadow: dict[int, engine.CompiledPolicy] = field(default_factory=dict)

    def for_call(self, *, tenant_id: int, skill_name: str) -> list[engine.CompiledPolicy]:
        return [p for p in self.published if p.applies_to(tenant_id=tenant_id, skill_name=skill_name)]

    def shadow_for_call(self, *, tenant_id: int, skill_name: str) -> list[engine.CompiledPolicy]:
        return [p for p in self.shadow.values() if p.applies_to(tenant_id=tenant_id, skill_name=skill_name)]


SCOPE_ORDER = {Scope.PLATFORM: 0, Scope.TENANT: 1, Scope.SKILL: 2}


def load_active_policies() -> ActivePolicies:
    """Published and shadow versions, compiled (cached per version). One query."""
    active = ActivePolicies()
    versions = PolicyVersion.objects.filter(status__in=[VersionStatus.PUBLISHED, VersionStatus.SHADOW]).select_related(
        "policy"
    )
    for version in sorted(versions, key=lambda v: (SCOPE_ORDER[v.policy.scope], v.policy_id)):
        compiled = compiled_policy(version)
        if version.status == VersionStatus.PUBLISHED:
            active.published.append(compiled)
        else:
            active.shadow[version.policy_id] = compiled
    return active


def evaluate_with_shadow(
    *, active: ActivePolicies, context: dict, tenant_id: int, approval_required: bool
) -> engine.Decision:
    """The enforced decision, with each applicable shadow version's would-be verdict beside it."""
    skill_name = context["skill"]["name"]
    enforced_set = active.for_call(tenant_id=tenant_id, skill_name=skill_name)
    decision = engine.evaluate(context=context, policies=enforced_set, approval_required=approval_required)
    for shadow in active.shadow_for_call(tenant_id=tenant_id, skill_name=skill_name):
        trial_set = [p for p in enforced_set if p.policy_id != shadow.policy_id] + [shadow]
        trial = engine.evaluate(context=context, policies=trial_set, approval_required=approval_required)
        decision.shadow.append(
            {
                "policy_version": shadow.version_label,
                "verdict": trial.verdict,
                "rule_id": trial.rule_id,
                "reason": trial.reason,
                "differs": trial.verdict != decision.verdict,
            }
        )
    return decision


# Simulation ---------------------------------------------------------------------------------------


@dataclass
class SimulatedCall:
    call: object
    recorded: str
    before: str
    after: str
    rule_id: str
    reason: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class Simulation:
    rows: list[SimulatedCall]
    counts: Counter
    not_replayed: int = 0

    @property
    def changed(self) -> list[SimulatedCall]:
        return [row for row in self.rows if row.changed]

    @property
    def count_rows(self) -> list[tuple[str, int]]:
        """(label, count), changes first; a plain list, since templates cannot iterate a Counter's items."""
        return sorted(self.counts.items(), key=lambda item: (item[0] == "unchanged", item[0]))


def calls_in_scope(policy: Policy):
    """Every recorded call the policy applies to, in every tenant: callers narrow it to what a person may see."""
    calls = hooks.recorded_calls()
    if policy.scope == Scope.TENANT:
        calls = calls.filter(run__tenant_id=policy.tenant_id)
    elif policy.scope == Scope.SKILL:
        calls = calls.filter(name=policy.skill_name)
    return calls.order_by("-created_at", "-id")


def simulate_policy(*, version: PolicyVersion, user, limit: int = 200) -> Simulation:
    """Replay the last `limit` recorded calls of the policy's scope with this version in place of the
    policy's published one; compare with the currently enforced set. Calls are replayed on their
    stored (redacted) arguments, so conditions over redacted fields see the redacted value.

    Only calls of tenants `user` belongs to are replayed. A skill policy also applies to other
    tenants, but a draft is the author's own probe: a rule such as `tenant.slug == "globex" &&
    end_user.id.startsWith("a")` would turn any number derived from evaluating it there (rows, a
    count, even "some changed") into a one-bit oracle on that tenant's end users. So other tenants'
    calls are never evaluated; `not_replayed` counts them, a number no rule can change."""
    active = load_active_policies()
    draft = compiled_policy(version, cache=False)
    rows: list[SimulatedCall] = []
    counts: Counter = Counter()
    in_scope = calls_in_scope(version.policy)
    for call in in_scope.visible_to(user)[:limit]:
        inputs = (call.decision or {}).get("inputs")
        if not inputs:
            continue
        context = {**inputs["context"], "args": call.arguments or {}}
        tenant_id = call.run.tenant_id
        current = active.for_call(tenant_id=tenant_id, skill_name=call.name)
        before = engine.evaluate(context=context, policies=current, approval_required=inputs.get("approval_required"))
        trial_set = [p for p in current if p.policy_id != version.policy_id]
        if draft.applies_to(tenant_id=tenant_id, skill_name=call.name):
            trial_set.append(draft)
        after = engine.evaluate(context=context, policies=trial_set, approval_required=inputs.get("approval_required"))
        row = SimulatedCall(
            call=call,
            recorded=call.verdict,
            before=before.verdict,
            after=after.verdict,
            rule_id=after.rule_id,
            reason=after.reason,
        )
        rows.append(row)
        counts[f"{row.before} → {row.after}" if row.changed else "unchanged"] += 1
    return Simulation(rows=rows, counts=counts, not_replayed=in_scope.hidden_from(user).count())


def shadow_differences(*, policy: Policy, user, limit: int = 100) -> list:
    """Recorded calls of `user`'s tenants where a shadow version of this policy would have decided
    differently. Other tenants' calls are left out, not counted: a shadow version is a probe too."""
    rows = []
    label_prefix = f"p{policy.pk}@"
    for call in calls_in_scope(policy).visible_to(user)[:1000]:
        for entry in (call.decision or {}).get("shadow", []):
            if entry.get("differs") and entry["policy_version"].startswith(label_prefix):
                rows.append({"call": call, "enforced": call.verdict, **entry})
        if len(rows) >= limit:
            break
    return rows


def publish_snapshot_if_grants_expired(*, now=None):
    """A grant that reaches its expiry changes what agents may discover: publish a snapshot once for it.

    The gate checks grants live; this keeps discovery and the signed snapshot in step. Returns the new
    snapshot, or None when no grant expired since the latest one.
    """
    now = now or timezone.now()
    latest = latest_snapshot()
    expired = Grant.objects.filter(revoked_at__isnull=True, expires_at__gt=latest.created_at, expires_at__lte=now)
    if not expired.exists():
        return None
    return publish_snapshot(reason="grant expired")


# Local decisions ----------------------------------------------------------------------------------


def set_local_decisions(
    *, tenant: Tenant, agent_roles: list[str], bundle_validity: timedelta, by_label: str
) -> LocalDecisionSettings:
    """Which of the tenant's agent roles may decide client-executed calls locally from a signed bundle, and
    how long a bundle holds. The next bundle each agent fetches carries the change."""
    row, _ = LocalDecisionSettings.objects.update_or_create(
        tenant=tenant,
        defaults={
            "agent_roles": sorted(set(agent_roles)),
            "bundle_validity": bundle_validity,
            "updated_at": timezone.now(),
            "updated_by_label": by_label[:150],
        },
    )
    return row
