"""Trying a version before it ships: where its calls may go (`execution.sandbox`), the manifest's `tests`,
and the records of both (`SkillTry`, `SkillTestRun`). Running them is the gate's work (`runs.trials`).

A sandbox stands in for the real target, so it must never be a production writer: a `python:` sandbox is a
function registered as the sandbox of the very function the skill runs (`register(..., sandbox_for=...)`),
that the owning team may use, needs no approval and is not destructive; an `mcp://` one a tool annotated
read-only; a URL one passes the egress guard. No credential is ever attached to a sandbox call
(`trial_manifest`). A version stored before these rules held is checked again when it is tried.
"""

from __future__ import annotations

from dataclasses import dataclass

from lib import egress
from lib.canonical import sha256_of
from registry.contracts import contract_for
from registry.models import SkillTestRun, SkillTry, SkillVersion
from registry.validation import problem

READ = "read"
# Follow-ups that would reach the real service or the tenant's secrets: a try never uses them.
PRODUCTION_ONLY_KEYS = ("credential", "reconcile", "job_status", "sandbox")


class NotTriable(Exception):
    """This version cannot be called outside a run; the message says why and what would make it triable."""

    code = "not_triable"


@dataclass(frozen=True)
class Target:
    adapter: str
    reason: str

    @property
    def is_sandbox(self) -> bool:
        return self.reason == "sandbox"


def sandbox_of(manifest: dict) -> str:
    return str((manifest.get("execution") or {}).get("sandbox") or "")


def try_target(manifest: dict, team_slug: str | None = None) -> Target:
    """Where a try of this manifest goes: its sandbox; a read without one goes to its real target (a read
    changes nothing, and runs only as the verdict allows); anything else without a sandbox cannot be tried."""
    sandbox = sandbox_of(manifest)
    if sandbox:
        problems = sandbox_problems(manifest, team_slug)
        if problems:
            raise NotTriable(f"Its sandbox {sandbox} cannot be used: {problems[0]['message']}")
        return Target(sandbox, "sandbox")
    effect = (manifest.get("risk") or {}).get("effect")
    if effect == READ:
        return Target(str(manifest["execution"]["adapter"]), "read_without_sandbox")
    raise NotTriable(
        f"{manifest.get('name')} {manifest.get('version')} has the effect {effect} and declares no "
        "execution.sandbox: trying it would call the real target. Name a sandbox (a function, URL or MCP tool "
        "of the same contract) in a new draft to try it."
    )


def trial_manifest(manifest: dict, target: Target) -> dict:
    """The manifest a try executes: the target as adapter, without credential, reconciliation or jobs."""
    execution = {k: v for k, v in (manifest.get("execution") or {}).items() if k not in PRODUCTION_ONLY_KEYS}
    return {**manifest, "execution": {**execution, "adapter": target.adapter}}


def sandbox_problems(manifest: dict, team_slug: str | None) -> list[dict]:
    """Why `execution.sandbox` may not be used (empty when it may)."""
    sandbox = sandbox_of(manifest)
    if not sandbox:
        return []
    path = "$.execution.sandbox"
    if sandbox == (manifest.get("execution") or {}).get("adapter"):
        return [problem(path, "sandbox_is_target", "The sandbox is the real adapter; name a separate target.")]
    if sandbox.startswith(("http://", "https://")):
        try:
            egress.check_url(sandbox)
        except egress.EgressRefused as exc:
            return [problem(path, "sandbox_egress_refused", f"Airlock may not call this sandbox: {exc}.")]
        return []
    contract = contract_for(sandbox)
    if contract is None:
        if sandbox.startswith("python:"):
            return [
                problem(
                    path,
                    "unknown_function",
                    f"No in-process function {sandbox.removeprefix('python:')} is registered in this deployment.",
                )
            ]
        return [problem(path, "unknown_sandbox", f"{sandbox} is no registered function, imported tool or URL.")]
    errors = _not_a_sandbox(manifest, sandbox, contract)
    if team_slug and sandbox.startswith("python:") and not contract.allows_team(team_slug):
        errors.append(
            problem(
                path,
                "function_not_for_team",
                f"{sandbox} may be used by {contract.teams_text} only, as its declaration says; not by {team_slug}.",
            )
        )
    if contract.effect == "destructive" or contract.approval != "not_required":
        errors.append(
            problem(
                path,
                "sandbox_needs_approval",
                f"{sandbox} declares the effect {contract.effect} and approval {contract.approval}; tries run "
                "without approval, so a sandbox must be a target that needs none.",
            )
        )
    return errors


def _not_a_sandbox(manifest: dict, sandbox: str, contract) -> list[dict]:
    """A sandbox is declared as one by its code: a function registered as the stand-in of the function the
    skill runs, or an MCP tool annotated read-only. Anything else may be a production writer."""
    adapter = str((manifest.get("execution") or {}).get("adapter") or "")
    if sandbox.startswith("python:"):
        stands_in_for = f"python:{contract.sandbox_for}" if contract.sandbox_for else ""
        if stands_in_for and stands_in_for == adapter:
            return []
        said = (
            f"it is registered as the sandbox of {stands_in_for}"
            if stands_in_for
            else "it is not registered as a sandbox"
        )
        return [
            problem(
                "$.execution.sandbox",
                "not_a_sandbox",
                f"{sandbox} cannot stand in for {adapter}: {said}. A sandbox is a function registered with "
                f"sandbox_for={adapter.removeprefix('python:')!r} (docs/registry.md).",
            )
        ]
    if contract.effect != READ:
        return [
            problem(
                "$.execution.sandbox",
                "not_a_sandbox",
                f"{sandbox} is annotated as {contract.effect}, not read-only: it may change a real system.",
            )
        ]
    return []


def manifest_test_problems(manifest: dict) -> list[dict]:
    """Tests that expect a valid call are run against a target: a version that has none cannot have them."""
    tests = manifest.get("tests") or []
    if not any(test.get("valid", True) for test in tests):
        return []
    try:
        try_target(manifest)
    except NotTriable:
        return [
            problem(
                "$.tests",
                "tests_need_sandbox",
                "Tests with valid arguments are run against the sandbox, and this version is not a read and "
                "declares no execution.sandbox.",
            )
        ]
    return []


def record_try(*, version: SkillVersion, tried_by, tenant, agent_role: str, via: str, **recorded) -> SkillTry:
    return SkillTry.objects.create(
        version=version, tried_by=tried_by, tenant=tenant, agent_role=agent_role, via=via, **recorded
    )


def record_test_run(
    *, version: SkillVersion, manifest: dict, trigger: str, ran_by, results: list[dict]
) -> SkillTestRun:
    return SkillTestRun.objects.create(
        version=version,
        manifest_sha256=sha256_of(manifest),
        trigger=trigger,
        ran_by=ran_by,
        passed=all(result["passed"] for result in results),
        results=results,
    )


def latest_test_run(version: SkillVersion) -> SkillTestRun | None:
    """The newest test run of the version's current manifest (an older manifest's results say nothing)."""
    return version.test_runs.filter(manifest_sha256=sha256_of(version.manifest)).first()
