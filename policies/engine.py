"""The policy engine as the server names it. The implementation is `airlock_sdk.policy.engine`, pure Python
over CEL, so that the SDK deciding from a signed bundle and the gate run the very same code (docs/
architecture.md, "The SDK")."""

from airlock_sdk.policy.engine import (
    CONTEXT_VARIABLES,
    DEFAULT_REASONS,
    OVERRIDE_TAINT_SCOPE,
    TAINT_FLOOR_EFFECTS,
    VERDICT_RANK,
    VERDICTS,
    CompiledPolicy,
    CompiledRule,
    ConditionError,
    Decision,
    check_condition,
    check_rules,
    clear_cache,
    compile_condition,
    compile_rules,
    condition_holds,
    default_verdict,
    evaluate,
    index_rules,
    sample_context,
)

__all__ = [
    "CONTEXT_VARIABLES",
    "DEFAULT_REASONS",
    "OVERRIDE_TAINT_SCOPE",
    "TAINT_FLOOR_EFFECTS",
    "VERDICTS",
    "VERDICT_RANK",
    "CompiledPolicy",
    "CompiledRule",
    "ConditionError",
    "Decision",
    "check_condition",
    "check_rules",
    "clear_cache",
    "compile_condition",
    "compile_rules",
    "condition_holds",
    "default_verdict",
    "evaluate",
    "index_rules",
    "sample_context",
]
