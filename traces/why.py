"""The "why" panel of a tool call: the debugging questions, in order, answered from the call's
recorded decision and its spans. A question with no evidence says so instead of guessing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policies.grants import active_patterns, granted_names
from registry.offering import offered_to
from registry.snapshots import load_snapshot
from traces.models import Span, SpanKind


@dataclass
class Answer:
    question: str
    answer: str
    status: str = "neutral"  # a pill class: ok, warn, bad, neutral
    details: list[tuple[str, Any]] = field(default_factory=list)
    approval_id: str = ""


def _exposed_tools(call: Any, spans: list[Span]) -> Answer:
    q = "Which tools did the resolver expose to this agent?"
    for span in spans:
        exposed = span.attributes.get("airlock.resolver.exposed") or span.attributes.get("airlock.tools.exposed")
        if exposed:
            return _exposure_answer(q, call.name, exposed if isinstance(exposed, list) else [exposed], "recorded")
    names = _reconstructed_exposure(call.run)
    if names is None:
        return Answer(q, "Not recorded.", "neutral")
    return _exposure_answer(q, call.name, names, "from the run's pinned snapshot and the grants as they are now")


def _exposure_answer(question: str, name: str, names: list, source: str) -> Answer:
    found = name in names
    return Answer(
        question,
        f"{len(names)} tools; {name} {'was' if found else 'was not'} among them",
        "ok" if found else "bad",
        [("exposed", ", ".join(map(str, names)) or "none"), ("source", source)],
    )


def _reconstructed_exposure(run: Any) -> list[str] | None:
    """Skills of the pinned snapshot offered to the tenant and agent role and covered by a grant.
    Read-only display; when the pieces are missing the panel says "not recorded" instead."""
    try:
        index = load_snapshot(run.snapshot.number)
        offered = [
            entry["name"]
            for entry in index.current_entries()
            if offered_to(entry.get("manifest", {}), tenant_slug=run.tenant.slug, agent_role=run.agent.role)
        ]
        return granted_names(active_patterns(tenant_id=run.tenant_id, agent_role=run.agent.role), offered)
    except Exception:  # a display aid must not break the panel
        return None


def _skill_and_version(call: Any, spans: list[Span]) -> Answer:
    q = "Which skill and schema version were chosen?"
    version = next((s.skill_version for s in spans if s.skill_version), "")
    if not version and call.skill_version_id:
        version = getattr(call.skill_version, "version", "")
    if not version:
        return Answer(
            q,
            f"{call.name} did not resolve to a skill version.",
            "bad",
            [("requested version", call.requested_version or "any")],
        )
    return Answer(
        q,
        f"{call.name}@{version}",
        "ok",
        [("requested version", call.requested_version or "active"), ("effect", call.effect or "—")],
    )


def _validation(call: Any) -> Answer:
    q = "What did validation say?"
    if call.status == "invalid" or call.error_class == "validation":
        issues = (call.decision or {}).get("validation") or call.warnings or []
        return Answer(q, "The arguments were rejected.", "bad", [("issues", issues)] if issues else [])
    if not call.skill_version_id:
        return Answer(q, "Not reached.", "neutral")
    return Answer(q, "The arguments matched the schema.", "ok", [("arguments sha256", call.arguments_sha256 or "—")])


def _policy(call: Any) -> Answer:
    q = "What did authorization and policy decide?"
    decision = call.decision or {}
    if not call.verdict:
        if call.error_class == "authorization":
            return Answer(q, "Authorization refused the call (no grant for this agent, user or tenant).", "bad")
        return Answer(q, "Not reached.", "neutral")
    status = {"allow": "ok", "confirm": "warn", "deny": "bad"}.get(call.verdict, "neutral")
    details: list[tuple[str, Any]] = [
        ("rule", decision.get("rule_id") or "—"),
        ("scope", decision.get("scope") or "—"),
        ("policy version", decision.get("policy_version") or "—"),
        ("reason", decision.get("reason") or "—"),
    ]
    details.extend(_floor_details(decision))
    for shadow in decision.get("shadow") or []:
        details.append(
            (
                f"shadow {shadow.get('policy_version', '')}",
                f"{shadow.get('verdict')} by {shadow.get('rule_id') or 'default'}"
                + (" (differs)" if shadow.get("differs") else ""),
            )
        )
    return Answer(q, call.verdict, status, details)


def _floor_details(decision: dict) -> list[tuple[str, Any]]:
    """A floor that raised the rule's verdict, and a platform rule that lowered the taint floor."""
    details: list[tuple[str, Any]] = []
    if decision.get("floor_id") == "floor:taint":
        details.append(("taint", "taint floor raised the verdict to confirm"))
    if decision.get("floor"):
        details.append(("floor", decision["floor"]))
    if decision.get("taint_overridden_by"):
        details.append(("taint", f"taint floor lowered by platform rule {decision['taint_overridden_by']}"))
    return details


def _approval(call: Any, spans: list[Span]) -> Answer:
    q = "Was approval required, and who gave it?"
    approval_spans = [
        s for s in spans if s.kind in (SpanKind.APPROVAL, SpanKind.APPROVAL_REQUEST, SpanKind.APPROVAL_DECISION)
    ]
    if call.verdict != "confirm" and not approval_spans:
        return Answer(q, "No approval was needed.", "neutral")
    approval_id = ""
    details: list[tuple[str, Any]] = []
    decided = ""
    for span in approval_spans:
        approval_id = str(
            span.attributes.get("approval_id") or span.attributes.get("airlock.approval.id") or approval_id
        )
        by = span.attributes.get("decided_by") or span.attributes.get("airlock.approval.decided_by")
        if span.outcome and span.outcome not in ("executed", "failed"):
            decided = span.outcome
        details.append((span.name, f"{span.outcome or 'requested'}{f' by {by}' if by else ''}"))
    if not decided:
        return Answer(q, "Approval required; not decided yet.", "warn", details, approval_id)
    return Answer(q, f"Approval required; {decided}.", "ok" if decided == "approved" else "bad", details, approval_id)


def _failures(call: Any, spans: list[Span]) -> Answer:
    q = "How were failures classified and retried?"
    details: list[tuple[str, Any]] = [("attempts", call.attempts)]
    for span in spans:
        if span.kind == SpanKind.EXECUTION_ATTEMPT or span.error_class:
            details.append((span.name, f"{span.outcome or '—'} {span.error_class or ''}".strip()))
    if call.error_class:
        return Answer(q, f"Failed as {call.error_class} after {call.attempts} attempt(s).", "bad", details)
    if call.status in ("succeeded", "reconciled"):
        return Answer(q, f"Succeeded after {call.attempts or 1} attempt(s).", "ok", details)
    return Answer(q, f"No execution outcome ({call.status}).", "neutral", details)


def _shaping(call: Any) -> Answer:
    q = "How was the result shaped?"
    if not call.result_sha256:
        return Answer(q, "No result.", "neutral")
    answer = f"{call.result_bytes} bytes" + (", truncated" if call.truncated else "")
    details = [("result sha256", call.result_sha256), ("warnings", call.warnings or "none")]
    return Answer(q, answer, "warn" if call.truncated else "ok", details)


def explain_call(*, call: Any, spans: list[Span]) -> list[Answer]:
    return [
        _exposed_tools(call, spans),
        _skill_and_version(call, spans),
        _validation(call),
        _policy(call),
        _approval(call, spans),
        _failures(call, spans),
        _shaping(call),
    ]
