"""Local decisions: a call of a skill the agent runs itself, decided from the signed bundle when the gate
cannot be reached (or first, with `local_first=True`), by the gate's own decision kernel
(`airlock_sdk.policy.kernel`) with the facts the bundle holds: the skill as it reaches this agent's run (a
version staged for a share of runs only inside that share, `reaches_run`), its
input schema, the offer and the grants, the agent's rate limit (counted in this process), the policies
and the floors, the bundle's validity and the role's opt-in. A deny is the gate's typed error, with the
same code, reason, rule and policy version. Whatever the gate would answer otherwise (confirm, a
server-side skill, a skill or version the bundle does not hold, an expired bundle, a role not opted in)
fails closed with `unavailable`: Airlock is unreachable, retry when it is back.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from airlock_sdk.bundles import CachedBundle
from airlock_sdk.policy import engine, kernel
from airlock_sdk.policy.audience import in_share
from airlock_sdk.policy.context import is_client_skill

WINDOW_S = 60
UNREACHABLE_CODE = "airlock_unreachable"


@dataclass(frozen=True)
class LocalVerdict:
    """What the bundle says about one call: `allow` (run it), or the error result the agent gets."""

    verdict: str  # "allow" | "deny" | "unavailable" | "invalid" | "rate_limited"
    reason: str
    skill: dict | None = None
    error: dict | None = None
    rule_id: str = ""
    policy_version: str = ""
    bundle_number: int = 0
    policy_verdict: str = ""  # the policy's own verdict (allow, confirm, deny) when the policy was reached
    floor_id: str = ""


def unavailable(why: str, *, retry_after: float, bundle_number: int = 0) -> LocalVerdict:
    message = (
        f"Airlock is unreachable and this call cannot be decided locally: {why}. Nothing ran; "
        f"retry when Airlock is reachable again (in about {math.ceil(retry_after)} s)."
    )
    error = {"class": "unavailable", "code": UNREACHABLE_CODE, "message": message, "retry_after": retry_after}
    return LocalVerdict("unavailable", why, error=error, bundle_number=bundle_number)


class CompiledBundle:
    """One bundle's skills, grants and policies, compiled once by the shared evaluator."""

    def __init__(self, bundle: CachedBundle) -> None:
        body = bundle.body
        self.bundle = bundle
        self.number = bundle.number
        self.audience: dict = body["audience"]
        self.tenant_id = int(body["tenant_id"])
        self.local_decisions = body.get("local_decisions") is True
        self.rate_limit = int(body["rate_limit_per_minute"])
        self.grants = [(str(g["pattern"]), list(g.get("scopes") or [])) for g in body.get("grants", [])]
        self.skills = {(s["name"], s["version"]): s for s in body.get("skills", [])}
        self.newest_first: dict[str, list[dict]] = {}
        for entry in sorted(body.get("skills", []), key=lambda s: _semver(s["version"]), reverse=True):
            if entry.get("status", "active") == "active":
                self.newest_first.setdefault(entry["name"], []).append(entry)
        self.policies = [
            engine.CompiledPolicy(
                policy_id=int(p["policy_id"]),
                name=p["name"],
                scope=p["scope"],
                tenant_id=p.get("tenant_id"),
                skill_name=p.get("skill_name") or "",
                version_id=int(p["version_id"]),
                version_number=int(p["version_number"]),
                rules=engine.compile_rules(p["rules"], version_id=int(p["version_id"])),
            )
            for p in body.get("policies", [])
        ]
        self._validators: dict[tuple[str, str], Draft202012Validator] = {}

    def resolve(self, name: str, version: str | None, run_id: str = "") -> dict | None:
        """The exact version (whether it reaches this run is the kernel's `reaches_audience`), or the newest
        active one that reaches this run, as the gate resolves it (registry.snapshots.SnapshotIndex.resolve)."""
        if version:
            return self.skills.get((name, version))
        return next((e for e in self.newest_first.get(name, []) if reaches_run(e, run_id)), None)

    def argument_errors(self, entry: dict, arguments: Any) -> list[dict]:
        """The input schema's objections, field by field, as the gate lists them."""
        errors = sorted(self.validator(entry).iter_errors(arguments), key=lambda e: list(e.absolute_path))
        return [
            {"field": "/".join(str(p) for p in e.absolute_path) or "(arguments)", "message": e.message}
            for e in errors[:20]
        ]

    def validator(self, entry: dict) -> Draft202012Validator:
        key = (entry["name"], entry["version"])
        if key not in self._validators:
            schema = (entry.get("manifest") or {}).get("input_schema") or {}
            self._validators[key] = Draft202012Validator(schema, format_checker=FormatChecker())
        return self._validators[key]


def reaches_run(entry: dict, run_id: str) -> bool:
    """Whether a bundle entry reaches this run: every entry reaches the agent's tenant (the server leaves out
    the rest), and one marked `share_of_runs` only the runs inside that share (the gate's own rule)."""
    if entry.get("reaches_audience", True) is False:
        return False
    share = entry.get("share_of_runs")
    return share is None or in_share(run_id, entry["name"], entry["version"], share)


def _skill_of(entry: dict, run_id: str) -> kernel.Skill:
    return kernel.Skill(
        name=entry["name"],
        version=entry["version"],
        effect=entry["effect"],
        data_class=entry["data_classification"],
        namespace=entry["namespace"],
        manifest=entry.get("manifest") or {},
        reaches_audience=reaches_run(entry, run_id),
    )


def _semver(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("-")[0].split("."))
    except ValueError:
        return (0,)


class LocalDecider:
    """Decides calls from the current bundle; counts the agent's calls per minute in this process."""

    def __init__(self) -> None:
        self._compiled: CompiledBundle | None = None
        self._lock = threading.Lock()
        self._window = (0, 0)  # (window number, calls in it)

    def compiled(self, bundle: CachedBundle) -> CompiledBundle:
        current = self._compiled
        if current is None or current.bundle is not bundle:
            current = self._compiled = CompiledBundle(bundle)
        return current

    def decide(
        self,
        bundle: CachedBundle | None,
        *,
        name: str,
        version: str | None,
        arguments: Any,
        run_tainted: bool,
        taint_source: str,
        end_user: str,
        end_user_roles: list[str],
        retry_after: float = 5.0,
        now: datetime | None = None,
        run_id: str = "",
    ) -> LocalVerdict:
        """The decision kernel's ruling (`airlock_sdk.policy.kernel`, the gate's own) with the bundle's facts.
        `run_id` picks the version a share-of-runs stage gives this run (without one, the version below)."""
        if bundle is None:
            return unavailable("no decision bundle has been received yet", retry_after=retry_after)
        compiled = self.compiled(bundle)
        number = compiled.number
        entry = compiled.resolve(name, version, run_id)
        if entry is not None and not is_client_skill(entry.get("manifest") or {}):
            return unavailable(f"{name} runs on Airlock's side", retry_after=retry_after, bundle_number=number)
        facts = kernel.Facts(
            path=kernel.Path.LOCAL_SDK,
            agent=kernel.Agent(
                id=compiled.audience["agent_id"],
                name=compiled.audience["agent_name"],
                role=compiled.audience["agent_role"],
            ),
            tenant=kernel.Tenant(id=compiled.tenant_id, slug=compiled.audience["tenant"]),
            run=kernel.RunState(
                end_user=end_user,
                end_user_roles=tuple(end_user_roles),
                tainted=run_tainted,
                taint_source=taint_source,
            ),
            name=name,
            version=version,
            skill=_skill_of(entry, run_id) if entry is not None else None,
            arguments=arguments,
            argument_errors=compiled.argument_errors(entry, arguments) if entry is not None else None,
            grants=compiled.grants,
            policies=lambda context, approval: engine.evaluate(
                context=context,
                policies=[p for p in compiled.policies if p.applies_to(tenant_id=compiled.tenant_id, skill_name=name)],
                approval_required=approval,
            ),
            rate_meter=lambda passed: self._over_limit(compiled.rate_limit),
            bundle=kernel.Bundle(
                number=number,
                expired=bundle.expired(now or datetime.now(UTC)),
                valid_until=str(bundle.body.get("valid_until", "")),
                opted_in=compiled.local_decisions,
            ),
        )
        ruling = kernel.decide(facts)
        if ruling.refused:
            what = f"{name} {version}" if version else name
            return self.refused(ruling.refusal, entry, number, what=what, retry_after=retry_after)
        return self.verdict_of(ruling.decision, entry, number, retry_after=retry_after)

    def _over_limit(self, limit: int) -> kernel.Refusal | None:
        """Count one call in this minute's window; the refusal when over `limit`."""
        now = time.time()
        window = int(now // WINDOW_S)
        with self._lock:
            count = self._window[1] + 1 if self._window[0] == window else 1
            self._window = (window, count)
        if count <= limit:
            return None
        wait = max(1, math.ceil((window + 1) * WINDOW_S - now))
        message = f"This agent made more than {limit} calls this minute."
        return kernel.Refusal("rate_limited", "agent_rate_limited", message, {"retry_after": wait})

    @staticmethod
    def refused(
        refusal: kernel.Refusal, entry: dict | None, number: int, *, what: str, retry_after: float
    ) -> LocalVerdict:
        """A kernel refusal as the agent's answer: what the bundle does not cover (an unknown skill, an expired
        bundle, a role not opted in) is `unavailable`; validation, authorization and the rate limit are the
        gate's own typed errors."""
        if refusal.error_class in ("unavailable", "not_found"):
            why = (
                f"{what} is not in decision bundle {number}" if refusal.error_class == "not_found" else refusal.message
            )
            return unavailable(why, retry_after=retry_after, bundle_number=number)
        error = {"class": refusal.error_class, "code": refusal.code, "message": refusal.message, **refusal.extra}
        error.pop("no_grant", None)
        verdict = {"validation": "invalid", "rate_limited": "rate_limited"}.get(refusal.error_class, "deny")
        return LocalVerdict(verdict, refusal.message, skill=entry, error=error, bundle_number=number)

    @staticmethod
    def verdict_of(decision: engine.Decision, entry: dict, number: int, *, retry_after: float) -> LocalVerdict:
        """The policy's decision as the call's answer: allow runs, deny is the gate's `denied_by_policy`, and
        confirm (no person can be asked while Airlock is down) is `unavailable`."""
        outcome = {
            "reason": decision.reason,
            "skill": entry,
            "rule_id": decision.rule_id,
            "policy_version": decision.policy_version,
            "bundle_number": number,
            "policy_verdict": decision.verdict,
            "floor_id": decision.floor_id,
        }
        if decision.verdict == "allow":
            return LocalVerdict("allow", **outcome)
        if decision.verdict == "deny":
            error = {"class": "authorization", "code": "denied_by_policy", "message": decision.reason}
            error["rule_id"] = decision.rule_id
            if decision.policy_version:
                error["policy_version"] = decision.policy_version
            return LocalVerdict("deny", error=error, **outcome)
        why = f"a person must confirm it ({decision.floor or decision.reason})"
        return replace(unavailable(why, retry_after=retry_after), **outcome)


__all__ = ["CompiledBundle", "LocalDecider", "LocalVerdict", "is_client_skill", "reaches_run", "unavailable"]
