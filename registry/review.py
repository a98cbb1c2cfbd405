"""Second-person review of skill versions: why a version needs one, what changed, which tenants it reaches.

A version needs another person's review when one owner alone could otherwise change, for every
tenant at once, where calls and tenant credentials go or how carefully they are gated:

- where calls go: `execution.adapter` (and its host), `execution.reconcile`, `execution.job_status`;
- what it carries: `execution.credential` (a tenant's secret) added or changed;
- how it is gated: effect class raised or lowered, `risk.approval` lowered, output marked trusted
  (`risk.untrusted_output` true → false), data classification lowered, permissions widened.

A first version (no published one before it) needs review when it names a tenant credential or
sends calls outside Airlock (http(s), mcp): nothing earlier was reviewed to compare it with, and its
name may already be covered by tenants' grants (`customer.*`). In-process `python:` functions are
deployed code, and `client:` skills run on the caller's side, so those first versions go live directly.

The tenants a version reaches come from its manifest (`allowed_tenants`) and from the tenants'
grants; grants belong to the policies app (a layer above), which appends its lookup to
`GRANT_SOURCES` at start-up.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lib.endpoints import endpoint_of, leaves_airlock
from registry.models import EFFECT_RANK
from registry.offering import offered_to

APPROVAL_RANK = {"not_required": 0, "required": 1, "two_person": 2}
DATA_RANK = {"public": 0, "internal": 1, "confidential": 2, "restricted": 3}
ENDPOINT_FIELDS = ("adapter", "reconcile", "job_status")
PERMISSION_LISTS = ("allowed_tenants", "allowed_agent_roles", "oauth_scopes")
DIFF_SECTIONS = ("execution", "risk", "permissions")


@dataclass(frozen=True)
class Finding:
    """One reason for review, with the manifest path it is about."""

    path: str
    reason: str


def findings(previous: dict | None, manifest: dict) -> list[Finding]:
    """Every reason `manifest` needs a second person, compared with the latest published `previous`.

    In the order a reviewer should read them: where calls go, what they carry, how they are gated.
    """
    execution = manifest.get("execution") or {}
    if previous is None:
        return _first_version_findings(execution)
    old_execution = previous.get("execution") or {}
    found = _endpoint_findings(old_execution, execution)
    old_credential, new_credential = old_execution.get("credential") or "", execution.get("credential") or ""
    if new_credential and new_credential != old_credential:
        found.append(
            Finding("$.execution.credential", f"credential changed from {old_credential or 'none'} to {new_credential}")
        )
    found += _risk_findings(previous.get("risk") or {}, manifest.get("risk") or {})
    found += _permission_findings(previous.get("permissions") or {}, manifest.get("permissions") or {})
    return found


def _endpoint_findings(old_execution: dict, execution: dict) -> list[Finding]:
    found = []
    for key in ENDPOINT_FIELDS:
        old, new = str(old_execution.get(key) or ""), str(execution.get(key) or "")
        if old == new or not new:
            continue
        if key != "adapter":
            found.append(Finding(f"$.execution.{key}", f"execution.{key} changed from {old or 'none'} to {new}"))
        elif leaves_airlock(old) and endpoint_of(old) != endpoint_of(new):
            found.append(
                Finding("$.execution.adapter", f"adapter host changed from {endpoint_of(old)} to {endpoint_of(new)}")
            )
        elif leaves_airlock(new) and not leaves_airlock(old):
            found.append(Finding("$.execution.adapter", f"calls now leave Airlock: {old} → {endpoint_of(new)}"))
        else:
            found.append(Finding("$.execution.adapter", f"adapter changed from {old} to {new}"))
    return found


def _risk_findings(old_risk: dict, risk: dict) -> list[Finding]:
    found = []
    old_effect, new_effect = old_risk.get("effect", "read"), risk.get("effect", "read")
    if EFFECT_RANK[new_effect] > EFFECT_RANK[old_effect]:
        found.append(Finding("$.risk.effect", f"effect raised from {old_effect} to {new_effect}"))
    elif EFFECT_RANK[new_effect] < EFFECT_RANK[old_effect]:
        found.append(Finding("$.risk.effect", f"effect lowered from {old_effect} to {new_effect}"))
    old_approval, new_approval = old_risk.get("approval", "not_required"), risk.get("approval", "not_required")
    if APPROVAL_RANK[new_approval] < APPROVAL_RANK[old_approval]:
        found.append(Finding("$.risk.approval", f"approval lowered from {old_approval} to {new_approval}"))
    if old_risk.get("untrusted_output") and not risk.get("untrusted_output"):
        found.append(Finding("$.risk.untrusted_output", "output marked trusted (untrusted_output true → false)"))
    old_data, new_data = old_risk.get("data_classification"), risk.get("data_classification")
    if old_data in DATA_RANK and new_data in DATA_RANK and DATA_RANK[new_data] < DATA_RANK[old_data]:
        found.append(
            Finding("$.risk.data_classification", f"data classification lowered from {old_data} to {new_data}")
        )
    return found


def _first_version_findings(execution: dict) -> list[Finding]:
    found = []
    for key in ENDPOINT_FIELDS:
        target = str(execution.get(key) or "")
        if not (target and leaves_airlock(target)):
            continue
        if key == "adapter":
            found.append(Finding("$.execution.adapter", f"first version sends calls to {endpoint_of(target)}"))
        else:
            found.append(
                Finding(f"$.execution.{key}", f"first version's execution.{key} reaches {endpoint_of(target)}")
            )
    if execution.get("credential"):
        found.append(
            Finding("$.execution.credential", f"first version uses the tenant credential {execution['credential']}")
        )
    return found


def _permission_findings(old_permissions: dict, new_permissions: dict) -> list[Finding]:
    found = []
    for key in PERMISSION_LISTS:
        old, new = set(old_permissions.get(key, [])), set(new_permissions.get(key, []))
        added = set() if "*" in old else new - old
        if added:
            found.append(Finding(f"$.permissions.{key}", f"{key} widened: {', '.join(sorted(added))}"))
    return found


def reasons(previous: dict | None, manifest: dict) -> list[str]:
    return [finding.reason for finding in findings(previous, manifest)]


@dataclass(frozen=True)
class FieldChange:
    """One changed field of execution, risk or permissions, shown as old → new."""

    path: str
    old: str
    new: str
    flagged: bool


def show(value: Any) -> str:
    """A manifest value as a reviewer reads it: absent is —, lists comma-separated, JSON otherwise."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "(none)"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)


def field_changes(previous: dict | None, manifest: dict) -> list[FieldChange]:
    """Every field of execution, risk and permissions whose value differs (all of them for a first version)."""
    flagged = {finding.path for finding in findings(previous, manifest)}
    changes = []
    for section in DIFF_SECTIONS:
        old_section = (previous or {}).get(section) or {}
        new_section = manifest.get(section) or {}
        for key in sorted(set(old_section) | set(new_section)):
            old, new = old_section.get(key), new_section.get(key)
            if previous is not None and old == new:
                continue
            path = f"$.{section}.{key}"
            changes.append(FieldChange(path, show(old) if previous is not None else "—", show(new), path in flagged))
    return changes


@dataclass(frozen=True)
class GrantReach:
    """An active grant of a tenant that covers the skill's name."""

    tenant_slug: str
    tenant_name: str
    agent_role: str
    skill_pattern: str


# f(skill_name) -> the active grants covering it; the policies app appends its lookup in ready().
GRANT_SOURCES: list[Callable[[str], list[GrantReach]]] = []


@dataclass
class Reach:
    """Which tenants a version reaches: the manifest allows them and a grant of theirs covers it."""

    every_tenant: bool
    allowed_tenants: list[str]
    allowed_roles: list[str]
    grants: list[GrantReach] = field(default_factory=list)

    manifest: dict = field(default_factory=dict)

    def allows(self, grant: GrantReach) -> bool:
        return offered_to(self.manifest, tenant_slug=grant.tenant_slug, agent_role=grant.agent_role)

    @property
    def rows(self) -> list[dict]:
        return [{"grant": grant, "reached": self.allows(grant)} for grant in self.grants]

    @property
    def reached_tenants(self) -> list[str]:
        return sorted({grant.tenant_slug for grant in self.grants if self.allows(grant)})


def reach_of(manifest: dict) -> Reach:
    permissions = manifest.get("permissions") or {}
    tenants = list(permissions.get("allowed_tenants") or [])
    grants: list[GrantReach] = []
    for source in GRANT_SOURCES:
        grants += source(str(manifest.get("name", "")))
    grants.sort(key=lambda g: (g.tenant_slug, g.agent_role, g.skill_pattern))
    return Reach(
        every_tenant="*" in tenants,
        allowed_tenants=[t for t in tenants if t != "*"],
        allowed_roles=list(permissions.get("allowed_agent_roles") or []),
        grants=grants,
        manifest=manifest,
    )
