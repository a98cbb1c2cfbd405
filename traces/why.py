"""The "why" panel of a tool call: the eight debugging questions of the runtime design, in order, answered
from what was recorded with the call at the time (its decision JSON, its fields and its spans), never
rebuilt from today's grants or policies. A question with no evidence says so instead of guessing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airlock_sdk.fencing import fenced_content

from traces.models import Span, SpanKind

REPORTED_BY = {
    "agent": "reported by the agent's framework for this turn",
    "gate": "the callable set at the time, not reported by the agent",
}
SHOWN_FIELDS = 20
OWNER_HIDDEN = (
    "exposed",
    "taint source",
    "message to the model",
    "the service said",
    "decided by",
    "available",
    "issues",
)
# What a skill owner outside the tenant learns of the policy that decided: which kind of policy, never its rule,
# reason, version, floors or shadows (the tenant's own rules, readable only by its members).
DECIDED_BY_SCOPE = {
    "tenant": "the calling tenant's policy",
    "platform": "a platform policy",
    "skill": "a policy of this skill",
    "default": "the built-in default for its effect",
}
KEYS = ("model_view", "adapter", "cost")
UNIT_LABELS = {
    "item": "{:g} items",
    "1k_tokens": "{:g} thousand tokens",
}  # what runs/result_facts.py keeps in the call's decision
SHOWN_NAMES = 12  # the panel's facts are cut at 300 characters
APPROVAL_KINDS = (SpanKind.APPROVAL, SpanKind.APPROVAL_REQUEST, SpanKind.APPROVAL_DECISION)
DECIDED = ("approved", "declined", "expired", "cancelled")


@dataclass
class Answer:
    question: str
    answer: str
    status: str = "neutral"  # a pill class: ok, warn, bad, neutral
    details: list[tuple[str, Any]] = field(default_factory=list)
    approval_id: str = ""
    owner_answer: str = ""  # instead of `answer` for a skill owner from another tenant, when it quotes their data
    owner_details: list[tuple[str, Any]] | None = None  # instead of `details` for that owner, when given


def _decision(call: Any) -> dict:
    return call.decision if isinstance(call.decision, dict) else {}


def _exposed_tools(call: Any) -> Answer:
    q = "Which tools were exposed to the model at that turn?"
    exposed = _decision(call).get("exposed_tools")
    if not isinstance(exposed, dict) or not isinstance(exposed.get("names"), list):
        return Answer(q, "Not recorded with this call.", "neutral")
    names = [str(name) for name in exposed["names"]]
    found = call.name in names
    among = f"{call.name} {'was' if found else 'was not'} among them"
    return Answer(
        q,
        f"{len(names)} tools; {among}",
        "ok" if found else "bad",
        [
            ("exposed", _listed(names)),
            ("source", REPORTED_BY.get(exposed.get("source"), "recorded")),
        ],
        owner_answer=f"The tools the tenant exposed: {among}.",  # how many follows from its grants
    )


def _listed(names: list[str]) -> str:
    """The names; a long list is cut with a count of the rest (the answer says if the called tool was in it)."""
    if not names:
        return "none"
    if len(names) <= SHOWN_NAMES:
        return ", ".join(names)
    return ", ".join(names[:SHOWN_NAMES]) + f" … and {len(names) - SHOWN_NAMES} more"


def _field_errors(error: dict) -> list[tuple[str, Any]]:
    details = []
    for item in (error.get("fields") or [])[:SHOWN_FIELDS]:
        if isinstance(item, dict):
            details.append((f"field {item.get('field') or '(call)'}", item.get("message") or ""))
    return details


def _validation(call: Any, spans: list[Span]) -> Answer:
    q = "Which skill version was chosen, and what did validation say?"
    error = _decision(call).get("error") or {}
    version = next((s.skill_version for s in spans if s.skill_version), "")
    if not version and call.skill_version_id:
        version = getattr(call.skill_version, "version", "")
    chosen = [
        ("skill", f"{call.name}@{version}" if version else call.name),
        ("requested version", call.requested_version or "active"),
    ]
    if error.get("class") == "not_found":
        message = error.get("message") or f"{call.name} did not resolve."
        return Answer(q, message, "bad", chosen[1:] + _available(error), owner_answer="The skill did not resolve.")
    if error.get("class") == "validation":
        details = [("code", error.get("code") or "—"), *_field_errors(error)]
        if error.get("schema_version"):
            details.append(("schema version", error["schema_version"]))
        message = error.get("message") or "The arguments were rejected."
        return Answer(q, message, "bad", chosen + details, owner_answer="The arguments were rejected.")
    if call.status == "invalid":  # recorded before errors were kept with the call
        return Answer(q, "The arguments were rejected.", "bad", chosen)
    if not version:
        return Answer(q, "Not reached.", "neutral", chosen)
    return Answer(
        q,
        f"{call.name}@{version}: the arguments matched its schema.",
        "ok",
        [*chosen, ("effect", call.effect or "—"), ("arguments sha256", call.arguments_sha256 or "—")],
    )


def _available(error: dict) -> list[tuple[str, Any]]:
    available = error.get("available")
    return [("available", ", ".join(map(str, available)))] if isinstance(available, list) else []


def _policy(call: Any) -> Answer:
    q = "Which policy rule and version decided?"
    decision = _decision(call)
    error = decision.get("error") or {}
    if not call.verdict:
        if error.get("class") == "authorization" or call.error_class == "authorization":
            details = [("code", error.get("code") or "—"), *_available(error)]
            message = error.get("message") or "Authorization refused the call."
            return Answer(q, message, "bad", details, owner_answer="Authorization refused the call.", owner_details=[])
        return Answer(q, "Not reached.", "neutral")
    status = {"allow": "ok", "confirm": "warn", "deny": "bad"}.get(call.verdict, "neutral")
    details: list[tuple[str, Any]] = [
        ("rule", decision.get("rule_id") or "default (no rule matched)"),
        ("scope", decision.get("scope") or "—"),
        ("policy version", decision.get("policy_version") or "none: the built-in default for its effect"),
        ("reason", decision.get("reason") or "—"),
    ]
    if decision.get("floor"):
        details.append(("floor", decision["floor"]))
    for shadow in decision.get("shadow") or []:
        details.append(
            (
                f"shadow {shadow.get('policy_version', '')}",
                f"{shadow.get('verdict')} by {shadow.get('rule_id') or 'default'}"
                + (" (differs)" if shadow.get("differs") else ""),
            )
        )
    refused = decision.get("refused_at_execution")
    if refused:
        details.append(("refused at execution", f"{refused.get('code')}: {refused.get('reason')}"))
    decided_by = DECIDED_BY_SCOPE.get(decision.get("scope") or "default", "a policy")
    return Answer(q, call.verdict, status, details, owner_details=[("policy", decided_by)])


def _taint(call: Any) -> Answer:
    q = "Was the run tainted, and by what?"
    decision = _decision(call)
    taint = decision.get("taint")
    if not isinstance(taint, dict):  # older calls kept only the policy's context
        taint = ((decision.get("inputs") or {}).get("context") or {}).get("run")
    if not isinstance(taint, dict):
        return Answer(q, "Not recorded with this call.", "neutral")
    # The floors applied are the tenant's policy at work (its rules and the platform's overrides): members only.
    details: list[tuple[str, Any]] = []
    if decision.get("floor_id") == "floor:taint":
        details.append(("floor", "taint floor raised the verdict to confirm"))
    if decision.get("taint_overridden_by"):
        details.append(("floor", f"taint floor lowered by platform rule {decision['taint_overridden_by']}"))
    if not taint.get("tainted"):
        return Answer(q, "Not tainted when this call was decided.", "ok", details, owner_details=[])
    source = taint.get("source") or taint.get("taint_source") or "unknown source"
    details = [("taint source", source), *details]
    return Answer(q, f"Tainted: {source}", "warn", details, owner_answer="Tainted.", owner_details=[])


def _approval(call: Any, spans: list[Span]) -> Answer:
    q = "Was approval required; who decided, when, and were the arguments edited?"
    approval_spans = [s for s in spans if s.kind in APPROVAL_KINDS]
    if call.verdict != "confirm" and not approval_spans:
        return Answer(q, "No approval was needed.", "neutral")
    approval_id, decided, details = "", "", []
    for span in approval_spans:
        attributes = span.attributes or {}
        approval_id = str(attributes.get("approval_id") or attributes.get("airlock.approval.id") or approval_id)
        if span.outcome in DECIDED:
            decided = span.outcome
            by = attributes.get("decided_by") or attributes.get("airlock.approval.decided_by") or "someone"
            details += [("decided by", by), ("decided at", span.ended_at.isoformat(timespec="seconds"))]
            if "edited" in attributes:
                details.append(("arguments edited", "yes" if attributes["edited"] else "no"))
    if not decided:
        return Answer(q, "Approval required; not decided yet.", "warn", details, approval_id)
    return Answer(q, f"Approval required; {decided}.", "ok" if decided == "approved" else "bad", details, approval_id)


def _attempts(call: Any, spans: list[Span]) -> Answer:
    q = "How many attempts ran, and how were failures classified?"
    details: list[tuple[str, Any]] = [("attempts", call.attempts)]
    for span in spans:
        attributes = span.attributes or {}
        if "airlock.breaker.state" in attributes:
            details.append(
                ("breaker", f"{attributes.get('airlock.breaker.domain', '')} {attributes['airlock.breaker.state']}")
            )
        if span.kind == SpanKind.EXECUTION_ATTEMPT or (span.error_class and span.kind != SpanKind.TOOL_CALL):
            details.append((span.name, f"{span.outcome or '—'} {span.error_class or ''}".strip()))
    if not call.attempts:
        return Answer(q, "Nothing ran.", "neutral", details)
    if call.error_class:
        return Answer(q, f"{call.attempts} attempt(s); failed as {call.error_class}.", "bad", details)
    return Answer(q, f"{call.attempts} attempt(s); no failure.", "ok", details)


def _shaping(call: Any) -> Answer:
    q = "How was the result shaped?"
    shaping = _decision(call).get("shaping")
    if not isinstance(shaping, dict):
        if not call.result_sha256:
            return Answer(q, "No result was shaped.", "neutral")
        answer = f"{call.result_bytes} bytes" + (", truncated" if call.truncated else "")
        return Answer(q, answer, "warn" if call.truncated else "ok", [("result sha256", call.result_sha256)])
    cut = shaping.get("cut")
    redacted = bool(shaping.get("redacted"))
    answer = f"{shaping.get('bytes_in')} → {shaping.get('bytes_out')} bytes"
    answer += f"; cut ({cut}) to fit {shaping.get('limit_bytes')} bytes" if cut else "; within its limit"
    answer += "; sensitive values redacted" if redacted else ""
    details = [
        ("bytes from the tool", shaping.get("bytes_in")),
        ("bytes to the model", shaping.get("bytes_out")),
        ("redacted", "yes" if redacted else "no"),
        ("truncated", f"yes ({cut})" if cut else "no"),
        ("result sha256", call.result_sha256 or "—"),
    ]
    facts = _model_view(call)
    if facts:
        answer += f"; {facts[0][1]}"
        details += facts
    return Answer(q, answer, "warn" if cut else "ok", details)


def _model_view(call: Any) -> list[tuple[str, Any]]:
    """What the result weighed in the model's context, which adapter produced it, and what it cost."""
    decision = _decision(call)
    view, adapter, charge = (decision.get(key) if isinstance(decision.get(key), dict) else {} for key in KEYS)
    facts: list[tuple[str, Any]] = []
    if view:
        facts.append(("tokens to the model", f"{call.result_tokens} tokens ({view.get('encoding', '?')})"))
    if getattr(call, "summarized_at", None):
        facts.append(
            ("in the model's context", f"replaced by a summary at {call.summarized_at.isoformat(timespec='seconds')}")
        )
    if adapter.get("name"):
        facts.append(("adapter", f"{adapter['name']} {adapter.get('version') or '(version not reported)'}"))
    if charge:
        priced = f"{charge.get('amount')} {charge.get('currency', '')}".strip()
        if charge.get("unit"):
            label = UNIT_LABELS.get(charge["unit"], "{:g} " + str(charge["unit"]))
            priced += f" for {label.format(charge.get('units', 0))}"
        facts.append(("cost", priced))
    return facts


def _outcome(call: Any) -> Answer:
    q = "What was the outcome?"
    result = call.result if isinstance(call.result, dict) else {}
    error = result.get("error") if isinstance(result.get("error"), dict) else {}
    details: list[tuple[str, Any]] = [("status", call.status)]
    if call.finished_at:
        details.append(("finished at", call.finished_at.isoformat(timespec="seconds")))
    if error:
        details += [
            ("error", f"{error.get('class')} / {error.get('code')}"),
            ("message to the model", error.get("message")),
        ]
        if error.get("downstream_message"):  # the skill's service refused the call, in these words
            details.append(("the service said", fenced_content(error["downstream_message"])))
    if call.status in ("succeeded", "reconciled"):
        return Answer(q, f"{call.status}: the model got the result.", "ok", details)
    if call.status in ("awaiting_approval", "executing", "proposed"):
        return Answer(q, f"{call.status}: no outcome yet.", "warn", details)
    return Answer(q, f"{call.status}" + (f": {error.get('code')}" if error else ""), "bad", details)


def _for_owner(answer: Answer) -> Answer:
    hidden = "(hidden: another tenant's data)"
    details = [(k, hidden if k in OWNER_HIDDEN or k.startswith(("shadow", "field ")) else v) for k, v in answer.details]
    if answer.owner_details is not None:
        details = answer.owner_details
    return Answer(answer.question, answer.owner_answer or answer.answer, answer.status, details, answer.approval_id)


def explain_call(*, call: Any, spans: list[Span], full: bool = True) -> list[Answer]:
    """The eight answers; `full=False` for a skill owner reading another tenant's call (traces.access):
    the answers without that tenant's agent, end user, payloads, exposed tools or policy: of the policy only
    its verdict and which kind of policy decided (`DECIDED_BY_SCOPE`), no rule, reason, version or floor."""
    answers = [
        _exposed_tools(call),
        _validation(call, spans),
        _policy(call),
        _taint(call),
        _approval(call, spans),
        _attempts(call, spans),
        _shaping(call),
        _outcome(call),
    ]
    return answers if full else [_for_owner(answer) for answer in answers]
