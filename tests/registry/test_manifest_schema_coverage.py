"""The manifest schema accepts every field the code reads from a manifest.

The schema refuses unknown properties (`additionalProperties: false`), so a field the code reads but
the schema does not list can never be set: the branch reading it is dead and owners cannot use it
(as `risk.approval_ttl_seconds` was). This scans the source (AST, not a list kept by hand) and
compares what it finds with the schema's properties. It counts as a read of a manifest field:

- `<m>.get("key")` or `<m>["key"]`, where `<m>` is named like a manifest (`manifest`, `version.manifest`,
  `_manifest(call)`, `self.manifest`): a top-level field;
- one more `.get("sub")` / `["sub"]` on that (`manifest["risk"]["effect"]`): a field of the section;
- `.get("sub")` / `["sub"]` on a name that holds a section: assigned from `<m>.get("risk") or {}` in the
  same function, or named after one (`risk`, `execution`, `old_execution`, as review.py's parameters are).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "registry" / "manifest.schema.json").read_text())
SKIP_DIRS = {".venv", ".git", "tests", "migrations", "sdk", "bench", "simulation", "node_modules"}
SECTIONS = {name for name, spec in SCHEMA["properties"].items() if "properties" in spec}


def _source_files() -> list[Path]:
    return [path for path in ROOT.rglob("*.py") if not SKIP_DIRS & set(path.relative_to(ROOT).parts[:-1])]


def _key_read(node: ast.AST) -> tuple[ast.AST, str] | None:
    """(the object read from, the literal key) for `obj.get("key", …)` or `obj["key"]`."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.func.value, node.args[0].value
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.value, node.slice.value
    return None


def _strip_default(node: ast.AST) -> ast.AST:
    """`x or {}` reads as `x`."""
    while isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        node = node.values[0]
    return node


def _is_manifest(node: ast.AST) -> bool:
    node = _strip_default(node)
    if isinstance(node, ast.Call):
        node = node.func
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    name = name.lstrip("_")
    return name in {"manifest", "manifest_of"} or name.endswith("_manifest")


def _section_read(node: ast.AST) -> str | None:
    """ "risk" for `<m>.get("risk")`, `<m>["risk"]`, or either `or {}`."""
    read = _key_read(_strip_default(node))
    return read[1] if read and _is_manifest(read[0]) else None


def _section_named(name: str) -> str | None:
    bare = name.removeprefix("old_").removeprefix("new_").removeprefix("previous_")
    return bare if bare in SECTIONS else None


def _section_of(target: ast.AST, held: dict[str, str]) -> str | None:
    """The manifest section `target` holds: read straight from a manifest, or a name that holds one."""
    if section := _section_read(target):
        return section
    if isinstance(target, ast.Name):
        return held.get(target.id) or _section_named(target.id)
    return None


def manifest_reads() -> dict[str, str]:
    """Each manifest field the code reads ("name", "risk.effect"), with the first place it is read."""
    reads: dict[str, str] = {}
    for path in sorted(_source_files()):
        tree = ast.parse(path.read_text(), filename=str(path))
        scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
        for scope in scopes:
            held: dict[str, str] = {}  # local name → the section assigned to it
            for node in ast.walk(scope):
                single = isinstance(node, ast.Assign) and len(node.targets) == 1
                if single and isinstance(node.targets[0], ast.Name) and (section := _section_read(node.value)):
                    held[node.targets[0].id] = section
            for node in ast.walk(scope):
                read = _key_read(node)
                if read is None:
                    continue
                target, key = read
                if _is_manifest(target):
                    field = key
                elif section := _section_of(target, held):
                    field = f"{section}.{key}"
                else:
                    continue
                reads.setdefault(field, f"{path.relative_to(ROOT)}:{node.lineno}")
    return reads


def schema_allows(field: str) -> bool:
    section, _, key = field.partition(".")
    spec = SCHEMA["properties"].get(section)
    if spec is None:
        return False
    if not key or "properties" not in spec:  # a top-level field, or inside a free-form JSON Schema
        return True
    return key in spec["properties"]


def test_the_scan_finds_the_reads_it_is_meant_to():
    reads = manifest_reads()
    assert {"name", "version", "execution", "risk", "input_schema", "output_schema"} <= set(reads)
    assert {
        "execution.adapter",
        "execution.idempotent",
        "execution.max_attempts",
        "execution.job_status",
        "execution.reconcile",
        "execution.credential",
        "risk.effect",
        "risk.approval",
        "risk.approval_ttl_seconds",
        "permissions.allowed_tenants",
        "ownership.team",
    } <= set(reads)
    assert not schema_allows("risk.no_such_field") and not schema_allows("no_such_section")


def test_every_manifest_field_the_code_reads_is_in_the_schema():
    refused = {field: where for field, where in manifest_reads().items() if not schema_allows(field)}
    assert not refused, f"registry/manifest.schema.json refuses fields the code reads: {refused}"


def test_the_review_findings_name_only_schema_fields():
    """review.py reads some execution fields through a tuple, which the AST scan cannot see."""
    from registry.review import ENDPOINT_FIELDS

    assert all(schema_allows(f"execution.{key}") for key in ENDPOINT_FIELDS)


@pytest.mark.parametrize(("ttl", "accepted"), [(120, True), (59, False), (604801, False), ("1h", False)])
def test_a_manifest_may_set_its_approval_ttl(ttl, accepted):
    from registry.validation import _schema_errors
    from tests.runs.factories import manifest

    body = manifest("billing.create_refund_request", effect="write")
    body["risk"]["approval_ttl_seconds"] = ttl
    errors = _schema_errors(body)
    assert (errors == []) is accepted, errors
