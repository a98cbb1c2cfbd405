"""The policy engine: CEL conditions over a documented context, precedence and defaults by effect.

Conditions are compiled once per policy version (published versions are immutable, so the cache
key is the version id). A decision evaluates only the rules its context can match (policies.
rule_index), and converts to CEL only the context variables those rules read. Python is never
`eval`ed: CEL has no side effects, no loops beyond bounded macros, and no I/O.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

import cel

from airlock_sdk.policy.activation import Activation
from airlock_sdk.policy.rule_index import Guard, RuleIndex, guards_of

logger = logging.getLogger(__name__)

VERDICTS = ("allow", "confirm", "deny")
VERDICT_RANK = {"allow": 0, "confirm": 1, "deny": 2}
CONTEXT_VARIABLES = ("skill", "args", "agent", "end_user", "tenant", "run")
_COMPILED: dict[int, tuple[list[dict], tuple[CompiledRule, ...]]] = {}
_INDEXED: dict[int, tuple[tuple[CompiledRule, ...], RuleIndex]] = {}

DEFAULT_REASONS = {
    "read": ("allow", "reads are allowed by default"),
    "draft": ("allow", "drafts are allowed by default"),
    "write": ("allow", "writes are allowed by default while the run is untainted"),
    "write_tainted": ("confirm", "a write after the run read untrusted content needs a person's confirmation"),
    "external": ("confirm", "actions with external effect need a person's confirmation"),
    "destructive": ("confirm", "destructive actions always need a person's confirmation"),
}
# Once a run has read untrusted content, calls of these effects get at least `confirm`, whatever allow rules say.
TAINT_FLOOR_EFFECTS = ("write", "external", "destructive")
OVERRIDE_TAINT_SCOPE = "platform"


@dataclass(frozen=True)
class CompiledRule:
    id: str
    verdict: str
    condition: str
    reason: str
    program: Any
    override_taint: bool = False
    variables: frozenset[str] = frozenset()
    guards: tuple[Guard, ...] = ()


@dataclass(frozen=True)
class CompiledPolicy:
    """A policy version ready to evaluate; built from the database or from a snapshot section."""

    policy_id: int
    name: str
    scope: str
    tenant_id: int | None
    skill_name: str
    version_id: int
    version_number: int
    rules: tuple[CompiledRule, ...]

    @property
    def version_label(self) -> str:
        return f"p{self.policy_id}@v{self.version_number}"

    @cached_property
    def index(self) -> RuleIndex:
        return index_rules(self.rules, version_id=self.version_id)

    def applies_to(self, *, tenant_id: int, skill_name: str) -> bool:
        if self.scope == "tenant":
            return self.tenant_id == tenant_id
        if self.scope == "skill":
            return self.skill_name == skill_name
        return True


@dataclass(slots=True)
class Decision:
    verdict: str
    rule_id: str
    scope: str
    policy_version: str
    reason: str
    policy_name: str = ""
    floor: str = ""
    floor_id: str = ""
    taint_overridden_by: str = ""
    errors: list[str] = field(default_factory=list)
    shadow: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        data = asdict(self)
        return {
            key: value
            for key, value in data.items()
            if value not in ("", [], None) or key in ("verdict", "rule_id", "scope", "policy_version", "reason")
        }


class ConditionError(ValueError):
    pass


def compile_condition(condition: str) -> Any:
    try:
        return cel.compile(condition)
    except ValueError as exc:
        raise ConditionError(str(exc).split("\n")[0]) from None


def condition_holds(program: Any, context: dict) -> bool:
    """Whether a compiled condition is true of a whole context (routes and previews, not the gate's hot
    path). A condition that cannot be evaluated on this context (a missing argument) raises ConditionError."""
    try:
        return program.execute(cel.Context(context)) is True
    except Exception as exc:  # noqa: BLE001 - CEL raises several types; the caller decides what a failure means
        raise ConditionError(f"{type(exc).__name__}: {str(exc).split(chr(10))[0]}") from None


def compile_rules(rules: list[dict], *, version_id: int | None = None) -> tuple[CompiledRule, ...]:
    """Compile a version's rules; cached by version id when one is given (published versions never change)."""
    if version_id is not None:
        cached = _COMPILED.get(version_id)
        # Published versions never change; comparing the source still guards against a reused id
        # (a restored or reset database) at the price of one cheap equality check.
        if cached is not None and cached[0] == rules:
            return cached[1]
    compiled = tuple(_compile_rule(rule) for rule in rules)
    if version_id is not None:
        _COMPILED[version_id] = (list(rules), compiled)
    return compiled


def _compile_rule(rule: dict) -> CompiledRule:
    source = rule["condition"] or "true"
    program = compile_condition(source)
    return CompiledRule(
        id=str(rule["id"]),
        verdict=rule["verdict"],
        condition=rule["condition"],
        reason=rule.get("reason", ""),
        program=program,
        override_taint=rule.get("override_taint") is True,
        variables=frozenset(program.variables()),
        guards=guards_of(source),
    )


def index_rules(rules: tuple[CompiledRule, ...], *, version_id: int | None = None) -> RuleIndex:
    """The rules' index, kept per version while `rules` are that version's cached compilation."""
    cached = _INDEXED.get(version_id) if version_id is not None else None
    if cached is not None and cached[0] is rules:
        return cached[1]
    index = RuleIndex([rule.guards for rule in rules])
    if version_id is not None and version_id in _COMPILED and _COMPILED[version_id][1] is rules:
        _INDEXED[version_id] = (rules, index)
    return index


def sample_context(**overrides: Any) -> dict:
    """A complete context with neutral values: used for checking conditions and as the base of policy tests."""
    context = {
        "skill": {
            "name": "docs.search_documentation",
            "version": "1.0.0",
            "effect": "read",
            "data_class": "internal",
            "namespace": "docs",
        },
        "args": {},
        "agent": {"id": "agent-1", "role": "support"},
        "end_user": {"id": "u-1", "roles": []},
        "tenant": {"slug": "acme"},
        "run": {"tainted": False, "taint_source": ""},
    }
    for key, value in overrides.items():
        if key in context and isinstance(value, dict) and isinstance(context[key], dict) and key != "args":
            context[key] = {**context[key], **value}
        elif key in context:
            context[key] = value
    return context


def check_condition(condition: str) -> list[str]:
    """Syntax and type problems in a condition, as messages for the editor (empty when fine).

    CEL here is dynamically typed, so after parsing we evaluate against a sample context: unknown
    variables and operator type mismatches surface; a missing `args` key does not (it depends on the call).
    """
    if not condition.strip():
        return ["The condition is empty; write `true` to match every call."]
    try:
        program = compile_condition(condition)
    except ConditionError as exc:
        return [f"Syntax error: {exc}"]
    try:
        result = program.execute(cel.Context(sample_context()))
    except KeyError:
        return []
    except TypeError as exc:
        return [f"Type error: {str(exc).split('. ')[0]}."]
    except RuntimeError as exc:
        message = str(exc).split(". ")[0]
        return [f"{message}. Known variables: {', '.join(CONTEXT_VARIABLES)}."]
    except Exception as exc:  # noqa: BLE001 - any other evaluation failure is still an authoring error
        return [f"Evaluation error: {exc}"]
    if not isinstance(result, bool):
        return [f"The condition must be true or false, but it gives a {type(result).__name__}."]
    return []


def check_rules(rules: list[dict], *, scope: str) -> dict[int, list[str]]:
    """Problems per rule index: ids, verdicts, reasons, conditions, and `override_taint` (platform allow rules only)."""
    problems: dict[int, list[str]] = {}
    seen: set[str] = set()
    for index, rule in enumerate(rules):
        errors: list[str] = []
        rule_id = str(rule.get("id", "")).strip()
        if not rule_id:
            errors.append("Give the rule an id.")
        elif rule_id in seen:
            errors.append(f"The id {rule_id} is used twice.")
        seen.add(rule_id)
        if rule.get("verdict") not in VERDICTS:
            errors.append("The verdict must be allow, confirm or deny.")
        if not str(rule.get("reason", "")).strip():
            errors.append("Give a reason: approvers and agents see it.")
        errors.extend(check_condition(str(rule.get("condition", ""))))
        errors.extend(_override_taint_problems(rule, scope))
        if errors:
            problems[index] = errors
    return problems


def _override_taint_problems(rule: dict, scope: str) -> list[str]:
    override = rule.get("override_taint", False)
    if not isinstance(override, bool):
        return ["override_taint must be true or false."]
    if not override:
        return []
    if scope != OVERRIDE_TAINT_SCOPE:
        return [
            f"Only a platform policy may lower the taint floor; remove override_taint from this {scope} policy's rule."
        ]
    if rule.get("verdict") != "allow":
        return ["override_taint only means something on an allow rule."]
    return []


def default_verdict(effect: str, tainted: bool) -> tuple[str, str, str]:
    """(verdict, rule id, reason) when no rule matches."""
    key = "write_tainted" if effect == "write" and tainted else effect
    verdict, reason = DEFAULT_REASONS.get(key, ("confirm", "unknown effect classes need confirmation"))
    return verdict, f"default:{key}", reason


def _matches(rule: CompiledRule, activation: Activation, errors: list[str], policy: CompiledPolicy) -> bool:
    activation.bind(rule.variables)  # outside the try: a context CEL cannot convert is refused, not recorded
    try:
        return rule.program.execute(activation.cel) is True
    except Exception as exc:  # noqa: BLE001 - a failing condition must never open the gate
        errors.append(f"{policy.version_label}/{rule.id}: {type(exc).__name__}")
        # Fail closed: a rule that restricts matches when it cannot be evaluated; one that allows does not.
        return rule.verdict != "allow"


def evaluate(
    *, context: dict, policies: list[CompiledPolicy], approval_required: bool = False, indexed: bool = True
) -> Decision:
    """The verdict for one call. Any matching deny wins, then confirm, then allow; with no match the
    default follows the effect class. Then the floors: destructive never ends in plain allow, nor does
    `approval: required`, nor a write, external or destructive call in a tainted run (unless the
    deciding allow rule is a platform rule with `override_taint`).

    `indexed=False` runs every rule in CEL against the whole context converted up front: the same
    decision, slower; the reference the index is tested against."""
    # Made when a rule first runs (most indexed decisions run none); with the index off, up front as it always was.
    activation = None if indexed else Activation(context, lazy=False)
    errors: list[str] = []
    best: tuple[CompiledRule, CompiledPolicy] | None = None
    for policy in policies:
        index = policy.index if indexed else None
        for position in index.candidates(context) if index else range(len(policy.rules)):
            rule = policy.rules[position]
            if best is not None and VERDICT_RANK[rule.verdict] <= VERDICT_RANK[best[0].verdict]:
                continue
            if activation is None:
                activation = Activation(context, lazy=indexed)
            if _matches(rule, activation, errors, policy):
                best = (rule, policy)
                if rule.verdict == "deny":
                    break
        if best is not None and best[0].verdict == "deny":
            break
    skill = context["skill"]
    if best is None:
        verdict, rule_id, reason = default_verdict(skill["effect"], bool(context["run"]["tainted"]))
        decision = Decision(
            verdict=verdict, rule_id=rule_id, scope="default", policy_version="", reason=reason, errors=errors
        )
    else:
        rule, policy = best
        decision = Decision(
            verdict=rule.verdict,
            rule_id=f"p{policy.policy_id}/{rule.id}",
            scope=policy.scope,
            policy_version=policy.version_label,
            reason=rule.reason,
            policy_name=policy.name,
            errors=errors,
        )
    _apply_floors(decision, context=context, best=best, approval_required=approval_required)
    return decision


def _apply_floors(
    decision: Decision, *, context: dict, best: tuple[CompiledRule, CompiledPolicy] | None, approval_required: bool
) -> None:
    """Raise an `allow` to `confirm` where a floor says so. Only the taint floor can be lowered, and only
    by the deciding rule being a platform allow rule with `override_taint`; the scope is checked here
    again, whatever the editor let through."""
    if decision.verdict != "allow":
        return
    effect = context["skill"]["effect"]
    run = context["run"]
    if effect == "destructive":
        decision.verdict, decision.floor = "confirm", "destructive actions are never allowed without a person"
        decision.floor_id = "floor:destructive"
    elif approval_required:
        decision.verdict, decision.floor = "confirm", "the skill's manifest requires approval"
        decision.floor_id = "floor:approval_required"
    elif run["tainted"] and effect in TAINT_FLOOR_EFFECTS:
        if best is not None and best[0].override_taint and best[1].scope == OVERRIDE_TAINT_SCOPE:
            decision.taint_overridden_by = decision.rule_id
            return
        source = run.get("taint_source") or "source not recorded"
        decision.verdict, decision.floor_id = "confirm", "floor:taint"
        decision.floor = (
            f"the run read untrusted content ({source}); writes, external and destructive actions "
            "need a person's confirmation"
        )


def clear_cache() -> None:
    _COMPILED.clear()
    _INDEXED.clear()
