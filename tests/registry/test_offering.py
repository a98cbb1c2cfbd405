"""One rule for who a version is offered to, used by discovery, the gate, review and the why panel."""

import ast
from pathlib import Path

import pytest

from registry.offering import offered_to, offers_role, offers_tenant

ROOT = Path(__file__).resolve().parents[2]


def manifest(tenants=None, roles=None) -> dict:
    permissions = {}
    if tenants is not None:
        permissions["allowed_tenants"] = tenants
    if roles is not None:
        permissions["allowed_agent_roles"] = roles
    return {"permissions": permissions}


@pytest.mark.parametrize(
    ("tenants", "roles", "expected"),
    [
        (["*"], ["*"], True),
        (["acme"], ["support"], True),
        (["globex"], ["support"], False),
        (["acme"], ["admin"], False),
        (None, ["*"], False),  # a missing list offers the version to nobody: fail closed
        (["*"], None, False),
        ("acme", ["*"], False),  # not a list
        ([], ["*"], False),
    ],
)
def test_offered_to(tenants, roles, expected):
    assert offered_to(manifest(tenants, roles), tenant_slug="acme", agent_role="support") is expected


def test_a_manifest_with_no_permissions_is_offered_to_nobody():
    assert not offers_tenant({}, "acme") and not offers_role({"permissions": None}, "support")


def test_no_other_module_reads_the_permission_lists_to_decide_who_is_offered():
    """The lists may be written (demo, MCP import) or shown (review), but only registry.offering decides."""
    readers = []
    for path in ROOT.glob("*/**/*.py"):
        if any(part in {".venv", "tests", "migrations", "bench", "sdk"} for part in path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in ("allowed_tenants", "allowed_agent_roles")
            ):
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    allowed = {"registry/offering.py", "registry/review.py"}  # review shows the lists to a person
    assert [r for r in readers if r.split(":")[0] not in allowed] == []
