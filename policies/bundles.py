"""Signed decision bundles: what one agent's SDK may decide by itself while Airlock is unreachable.

A bundle holds the client-executed skills offered to the agent (their snapshot entries, only the versions
that reach its tenant: `client_entries`), its tenant's
active grants for its role, the published policies that can apply to it (source rules, compiled by the
SDK with the same evaluator, `airlock_sdk.policy`), the agent's rate limit, whether its role may decide
locally, an audience (tenant, agent, the key in use), a number that only grows and `valid_until`. It is
signed like a snapshot (RFC 8785, Ed25519, `lib.signing`).

Validity runs in windows of half the tenant's duration, so that within a window the bundle (and its
ETag) stays the same and a conditional GET answers 304, while a bundle fetched at any moment still
holds for at least half the duration. Its number grows by one whenever its content changes
(`IssuedBundle`, one conditional UPDATE), and each number is kept with its window, its opt-in and its
snapshot (`IssuedBundleNumber`): an upload of the calls decided under it is judged against them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from airlock_sdk.policy.context import is_client_skill
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from console.models import Agent, Tenant
from lib import signing
from lib.canonical import canonical_json
from policies.grants import active_grants
from policies.models import IssuedBundle, IssuedBundleNumber, LocalDecisionSettings, PolicyVersion, Scope, VersionStatus
from registry.offering import offered_to
from registry.snapshots import SnapshotIndex, latest_index
from registry.stages import Audience

BUNDLE_FORMAT = "airlock.bundle/1"
DEFAULT_VALIDITY = timedelta(minutes=10)
SCOPE_ORDER = {Scope.PLATFORM: 0, Scope.TENANT: 1, Scope.SKILL: 2}
EPOCH = datetime(2020, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SignedBundle:
    body: dict
    signature: str
    key_id: str
    etag: str


def settings_of(tenant: Tenant) -> LocalDecisionSettings:
    """The tenant's settings row, or an unsaved one with the defaults (no role opted in)."""
    return LocalDecisionSettings.objects.filter(tenant=tenant).first() or LocalDecisionSettings(tenant=tenant)


def validity_of(tenant_settings: LocalDecisionSettings) -> timedelta:
    ceiling = timedelta(seconds=settings.AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS)
    return max(timedelta(seconds=30), min(tenant_settings.bundle_validity, ceiling))


def _window(now: datetime, validity: timedelta) -> tuple[datetime, datetime]:
    half = validity / 2
    issued_at = EPOCH + half * ((now - EPOCH) // half)
    return issued_at, issued_at + validity


def client_entries(agent: Agent, index: SnapshotIndex) -> list[dict]:
    """Every callable version (active and deprecated) of the client-executed skills offered to the agent that
    reaches its tenant, as the gate resolves a run's versions (registry.stages): a canary staged for other
    tenants and a rolled-back version are left out; one staged for a share of runs is marked `share_of_runs`
    (its percent), and the SDK uses it only in the runs inside that share (airlock_sdk.policy.audience)."""
    audience, stages, entries = Audience(tenant_id=agent.tenant_id), index.stages, []
    for entry in index.skills:
        if not is_client_skill(entry["manifest"]) or not offered_to(
            entry["manifest"], tenant_slug=agent.tenant.slug, agent_role=agent.role
        ):
            continue
        if stages.reaches(entry["name"], entry["version"], audience):
            entries.append(entry)
        elif share := stages.runs_share(entry["name"], entry["version"], agent.tenant_id):
            entries.append({**entry, "share_of_runs": share})
    return sorted(entries, key=lambda entry: (entry["name"], entry["skill_version_id"]))


def policy_entries(tenant: Tenant, skill_names: set[str]) -> list[dict]:
    """The published policy versions that can apply to these skills of this tenant, in the gate's order."""
    versions = PolicyVersion.objects.filter(status=VersionStatus.PUBLISHED).select_related("policy")
    entries = []
    for version in sorted(versions, key=lambda v: (SCOPE_ORDER[v.policy.scope], v.policy_id)):
        policy = version.policy
        if (policy.scope == Scope.TENANT and policy.tenant_id != tenant.pk) or (
            policy.scope == Scope.SKILL and policy.skill_name not in skill_names
        ):
            continue
        entries.append(
            {
                "policy_id": policy.pk,
                "name": policy.name,
                "scope": policy.scope,
                "tenant_id": policy.tenant_id,
                "skill_name": policy.skill_name,
                "version_id": version.pk,
                "version_number": version.number,
                "rules": version.rules,
            }
        )
    return entries


def _content(agent: Agent, now: datetime) -> dict:
    tenant = agent.tenant
    tenant_settings = settings_of(tenant)
    issued_at, valid_until = _window(now, validity_of(tenant_settings))
    index = latest_index()
    skills = client_entries(agent, index)
    return {
        "format": BUNDLE_FORMAT,
        "issued_at": issued_at.isoformat(),
        "valid_until": valid_until.isoformat(),
        "audience": {
            "tenant": tenant.slug,
            "agent_id": agent.pk,
            "agent_name": agent.name,
            "key_lookup": agent.key_in_use,
            "agent_role": agent.role,
        },
        "tenant_id": tenant.pk,
        "snapshot": index.number,
        # A frozen tenant runs reads only, decided by the gate: its agents decide nothing locally meanwhile.
        "local_decisions": agent.role in tenant_settings.agent_roles and not tenant.is_frozen,
        "rate_limit_per_minute": settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE,
        "grants": [
            {"pattern": pattern, "scopes": scopes}
            for pattern, scopes in active_grants(tenant_id=tenant.pk, agent_role=agent.role)
        ],
        "skills": skills,
        "policies": policy_entries(tenant, {entry["name"] for entry in skills}),
    }


def _number_for(agent: Agent, sha256: str) -> int:
    """The bundle number for this content: the last one when unchanged, else one more (first writer wins)."""
    issued, _ = IssuedBundle.objects.get_or_create(agent=agent)
    if issued.content_sha256 == sha256:
        return issued.number
    IssuedBundle.objects.filter(pk=issued.pk, number=issued.number).update(
        number=F("number") + 1, content_sha256=sha256, issued_at=timezone.now()
    )
    return IssuedBundle.objects.values_list("number", flat=True).get(pk=issued.pk)


def _keep_number(agent: Agent, number: int, content: dict) -> None:
    """Keep what this number was issued with, once (the first writer's, as for the number itself): its window,
    its opt-in and its snapshot, which an upload naming it is judged against (runs.local_calls)."""
    IssuedBundleNumber.objects.get_or_create(
        agent=agent,
        number=number,
        defaults={
            "issued_at": datetime.fromisoformat(content["issued_at"]),
            "valid_until": datetime.fromisoformat(content["valid_until"]),
            "local_decisions": content["local_decisions"],
            "snapshot_number": content["snapshot"],
        },
    )


def bundle_for(agent: Agent, *, now: datetime | None = None) -> SignedBundle:
    """The agent's current bundle, signed for the key it presented (`agent.key_in_use`)."""
    content = _content(agent, now or timezone.now())
    sha256 = hashlib.sha256(canonical_json(content)).hexdigest()
    body = {**content, "number": _number_for(agent, sha256)}
    _keep_number(agent, body["number"], content)
    return SignedBundle(
        body=body,
        signature=signing.sign(canonical_json(body)),
        key_id=signing.key_id(),
        etag=f'"b{body["number"]}-{sha256[:16]}"',
    )


__all__ = ["BUNDLE_FORMAT", "SignedBundle", "bundle_for", "client_entries", "settings_of", "validity_of"]
