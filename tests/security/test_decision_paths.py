"""Every place that can run or judge a tool call is a known path of the decision kernel.

The paths are a list in code (`airlock_sdk.policy.kernel.Path`). This test reads the source (the server's apps
and the SDK) for every call that decides a call (`kernel.decide`, the SDK's decider), re-checks a decided one
before it acts (`live_refusal`, `recorded_call_refusal`, `live_ruling`), sends calls through the gate
(`process_batch`) or executes a tool (`execution.execute`, `execute_concurrently`), and fails when one sits
in a function this table does not name: a new executing path must be added to `kernel.Path`, here, and to
the path × refusal matrix (tests/security/test_decision_matrix.py) before it lands.
"""

from __future__ import annotations

import ast
from pathlib import Path as FilePath

from airlock_sdk.policy.kernel import Path

ROOT = FilePath(__file__).resolve().parents[2]
SOURCES = ["lib", "console", "registry", "policies", "traces", "runs", "approvals", "reliability", "retention",
           "mcp_gateway", "airlock", "sdk/airlock_sdk"]  # fmt: skip
GATE_PATHS = {Path.REST_GATE, Path.MCP_GATEWAY, Path.PIPELINE_STEP, Path.RESULT_PAGE, Path.DESCRIBE_RESULT}

# (module, function) -> the kernel paths it serves.
SITES: dict[tuple[str, str], set[Path]] = {
    # the gate: one ruling per proposed call, whichever face proposed it (a page or describe_result is a call)
    ("runs.gate", "_ruling"): GATE_PATHS,
    ("runs.gate", "_guarded"): GATE_PATHS,  # the live re-check right before a write runs
    ("runs.gate", "_execute_allowed"): GATE_PATHS,
    ("runs.gate", "_execute_write"): GATE_PATHS,
    ("runs.api.views", "RunCalls.post"): {Path.REST_GATE},
    ("mcp_gateway.calls", "propose_call"): {Path.MCP_GATEWAY},
    ("reliability.sagas", "_call"): {Path.PIPELINE_STEP},
    ("approvals.demo", "seed"): {Path.REST_GATE},  # the demo's agent proposing its first calls
    ("approvals.demo", "_declined_refund"): {Path.REST_GATE},
    # decided calls about to act
    ("runs.services", "execute_approved_call"): {Path.APPROVED_RESUME},
    ("runs.services", "_approved_outcome"): {Path.APPROVED_RESUME},
    ("runs.client_exec", "_live_refusal"): {Path.CLIENT_RESULT},
    ("reliability.jobs", "job_refusal"): {Path.LONG_JOB_END},
    ("runs.authorization", "recorded_call_refusal"): {Path.APPROVED_RESUME, Path.CLIENT_RESULT, Path.LONG_JOB_END},
    ("runs.authorization", "live_refusal"): GATE_PATHS | {Path.APPROVED_RESUME, Path.CLIENT_RESULT, Path.LONG_JOB_END},
    ("runs.authorization", "live_ruling"): GATE_PATHS | {Path.APPROVED_RESUME, Path.CLIENT_RESULT, Path.LONG_JOB_END},
    ("runs.authorization", "decision_on"): {Path.APPROVED_RESUME},  # an approver's edit, judged as it will run
    # owners
    ("runs.trials", "attempt_call"): {Path.TRY, Path.MANIFEST_TEST},
    ("runs.trials", "_execute"): {Path.TRY, Path.MANIFEST_TEST},
    # decided from a bundle, and judged again on upload
    ("airlock_sdk.local", "LocalDecider.decide"): {Path.LOCAL_SDK},
    ("airlock_sdk.run", "Run._decide_locally"): {Path.LOCAL_SDK},
    ("runs.local_review", "reevaluate"): {Path.UPLOAD_REVIEW},
}
DECIDING = {"live_refusal", "recorded_call_refusal", "live_ruling", "process_batch", "execute_concurrently"}


def _is_site(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
    if name in DECIDING:
        return True
    if name == "execute":
        return receiver.endswith("execution")
    if name == "decide":
        return receiver.endswith(("kernel", "decider"))
    return False


def _sites() -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for source in SOURCES:
        for file in sorted((ROOT / source).rglob("*.py")):
            if "migrations" in file.parts or "tests" in file.parts:
                continue
            module = ".".join(
                file.relative_to(ROOT / ("sdk" if source.startswith("sdk") else "")).with_suffix("").parts
            )
            _visit(ast.parse(file.read_text()), module, [], found)
    return found


def _visit(node: ast.AST, module: str, scope: list[str], found: dict) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            _visit(child, module, [*scope, child.name], found)
            continue
        if isinstance(child, ast.Call) and _is_site(child) and scope:
            key = (module, ".".join(name for name in scope if name != "<lambda>"))
            found[key] = found.get(key, 0) + 1
        _visit(child, module, scope, found)


def _enclosing(key: tuple[str, str]) -> tuple[str, str]:
    """A nested helper (a closure) counts as the function that holds it."""
    module, qualname = key
    for known_module, known in SITES:
        if known_module == module and (qualname == known or qualname.startswith(known + ".")):
            return known_module, known
    return key


def test_every_site_that_runs_or_judges_a_call_is_a_known_path():
    unknown = sorted({_enclosing(key) for key in _sites()} - set(SITES))
    assert not unknown, (
        f"{unknown} run or judge a tool call outside the kernel's known paths: add the path to "
        "airlock_sdk.policy.kernel.Path, to SITES here, and to tests/security/test_decision_matrix.py"
    )


def test_the_table_names_no_site_that_is_gone_and_every_path_has_one():
    present = {_enclosing(key) for key in _sites()}
    assert set(SITES) <= present, f"gone from the code: {sorted(set(SITES) - present)}"
    assert set().union(*SITES.values()) == set(Path)
