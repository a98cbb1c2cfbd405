"""Local decisions: a call of a skill the agent runs itself, decided from the signed bundle when the gate
cannot be reached (or first, with `local_first=True`), with the gate's semantics, in the gate's order.

The checks, as `runs.gate._decide` makes them: the call's taint mark, the skill in the bundle, its
arguments against the input schema, the offer and the grants (`airlock_sdk.policy.permission`), the
agent's rate limit (a refused call counts too), then the policies (`airlock_sdk.policy.engine`, the
gate's own evaluator) with the taint floor. A deny is the gate's typed error, with the same code,
reason, rule and policy version. Whatever the gate would answer otherwise (confirm, a server-side skill,
a skill or version the bundle does not hold, an expired bundle, a role not opted in) fails closed with
`unavailable`: Airlock is unreachable, retry when it is back.
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
from airlock_sdk.policy import engine, permission
from airlock_sdk.policy.context import approval_required, call_context

CLIENT_SCHEME = "client:"
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


def is_client_skill(manifest: dict) -> bool:
    return str((manifest.get("execution") or {}).get("adapter", "")).startswith(CLIENT_SCHEME)


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
        self.latest = {}
        for entry in sorted(body.get("skills", []), key=lambda s: _semver(s["version"])):
            if entry.get("status", "active") == "active":
                self.latest[entry["name"]] = entry
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

    def resolve(self, name: str, version: str | None) -> dict | None:
        return self.skills.get((name, version)) if version else self.latest.get(name)

    def validator(self, entry: dict) -> Draft202012Validator:
        key = (entry["name"], entry["version"])
        if key not in self._validators:
            schema = (entry.get("manifest") or {}).get("input_schema") or {}
            self._validators[key] = Draft202012Validator(schema, format_checker=FormatChecker())
        return self._validators[key]


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

    def _over_limit(self, limit: int) -> float | None:
        """Count one call in this minute's window; the seconds until it resets when over `limit`."""
        now = time.time()
        window = int(now // WINDOW_S)
        with self._lock:
            count = self._window[1] + 1 if self._window[0] == window else 1
            self._window = (window, count)
        return None if count <= limit else max(1, math.ceil((window + 1) * WINDOW_S - now))

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
    ) -> LocalVerdict:
        if bundle is None:
            return unavailable("no decision bundle has been received yet", retry_after=retry_after)
        number = bundle.number
        if bundle.expired(now or datetime.now(UTC)):
            return unavailable(
                f"decision bundle {number} expired at {bundle.body['valid_until']}",
                retry_after=retry_after,
                bundle_number=number,
            )
        compiled = self.compiled(bundle)
        if not compiled.local_decisions:
            why = "this agent's role may not decide locally"
            return unavailable(why, retry_after=retry_after, bundle_number=number)
        entry = compiled.resolve(name, version)
        if entry is None:
            return unavailable(
                f"{name}{' ' + version if version else ''} is not in decision bundle {number}",
                retry_after=retry_after,
                bundle_number=number,
            )
        manifest = entry.get("manifest") or {}
        if not is_client_skill(manifest):
            return unavailable(f"{name} runs on Airlock's side", retry_after=retry_after, bundle_number=number)
        refused = self._refusal(compiled, entry, manifest, arguments)
        if refused is not None:
            return refused
        context = call_context(
            skill={
                "name": entry["name"],
                "version": entry["version"],
                "effect": entry["effect"],
                "data_class": entry["data_classification"],
                "namespace": entry["namespace"],
            },
            arguments=arguments,
            agent_id=compiled.audience["agent_id"],
            agent_name=compiled.audience["agent_name"],
            agent_role=compiled.audience["agent_role"],
            end_user=end_user,
            end_user_roles=end_user_roles,
            tenant_slug=compiled.audience["tenant"],
            tainted=run_tainted,
            taint_source=taint_source,
        )
        applicable = [p for p in compiled.policies if p.applies_to(tenant_id=compiled.tenant_id, skill_name=name)]
        decision = engine.evaluate(context=context, policies=applicable, approval_required=approval_required(manifest))
        return self.verdict_of(decision, entry, number, retry_after=retry_after)

    def _refusal(self, compiled: CompiledBundle, entry: dict, manifest: dict, arguments: Any) -> LocalVerdict | None:
        """Validation and the grants, then the agent's rate limit, as the gate orders them (a refused call
        still counts; over the limit, that is the answer)."""
        number = compiled.number
        errors = sorted(compiled.validator(entry).iter_errors(arguments), key=lambda e: list(e.absolute_path))
        failure: LocalVerdict | None = None
        if errors:
            fields = [
                {"field": "/".join(str(p) for p in e.absolute_path) or "(arguments)", "message": e.message}
                for e in errors[:20]
            ]
            message = f"The arguments do not match {entry['name']} {entry['version']}: " + "; ".join(
                f"{f['field']}: {f['message']}" for f in fields[:5]
            )
            error = {
                "class": "validation",
                "code": "invalid_arguments",
                "message": message,
                "fields": fields,
                "schema_version": entry["version"],
            }
            failure = LocalVerdict("invalid", message, skill=entry, error=error, bundle_number=number)
        else:
            refused = permission.refusal(
                name=entry["name"],
                manifest=manifest,
                tenant_slug=compiled.audience["tenant"],
                agent_role=compiled.audience["agent_role"],
                grants=compiled.grants,
            )
            if refused is not None:
                error = {"class": "authorization", "code": refused.code, "message": refused.message}
                failure = LocalVerdict("deny", refused.message, skill=entry, error=error, bundle_number=number)
        wait = self._over_limit(compiled.rate_limit)
        if wait is not None:
            message = f"This agent made more than {compiled.rate_limit} calls this minute."
            error = {"class": "rate_limited", "code": "agent_rate_limited", "message": message, "retry_after": wait}
            return LocalVerdict("rate_limited", message, skill=entry, error=error, bundle_number=number)
        return failure

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


__all__ = ["CompiledBundle", "LocalDecider", "LocalVerdict", "is_client_skill", "unavailable"]
