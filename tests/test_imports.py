"""Project modules are imported at the top of a module, where the layer contracts (pyproject.toml,
lint-imports) and a reader see them: an import inside a function to dodge a cycle is a sign the layer
is wrong (the house style). Intra-app cycles between a Celery `tasks.py` and its services
are written as module imports (`from approvals import services`, then `services.fn(...)` at call time),
which Python resolves whichever module is imported first."""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGES = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"])

# "path:function" -> why the import must stay inside it. Keep this tiny; prefer fixing the layer.
# (`AppConfig.ready()` in an apps.py is allowed without a listing: models may only load once the
# app registry is ready, which is what ready() is for.)
ALLOWED: dict[str, str] = {}


def _is_project_import(node: ast.Import | ast.ImportFrom, packages: tuple[str, ...]) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in packages
    return any(alias.name.split(".")[0] in packages for alias in node.names)


def _module_name(node: ast.Import | ast.ImportFrom) -> str:
    if isinstance(node, ast.ImportFrom):
        return "." * node.level + (node.module or "")
    return node.names[0].name


def _nested_imports(path: Path, root: Path, packages: tuple[str, ...]) -> list[str]:
    """`path:line: function: module` for each project import inside a function or class body."""
    relative, found = path.relative_to(root), []

    def visit(node: ast.AST, scope: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and scope and _is_project_import(child, packages):
                in_ready = (
                    path.name == "apps.py"
                    and [type(s) for s in scope] == [ast.ClassDef, ast.FunctionDef]
                    and scope[-1].name == "ready"
                )
                if not in_ready and f"{relative}:{scope[-1].name}" not in ALLOWED:
                    found.append(f"{relative}:{child.lineno}: {scope[-1].name}: {_module_name(child)}")
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*scope, child])
            else:
                visit(child, scope)

    visit(ast.parse(path.read_text(), filename=str(path)), [])
    return found


def _project_files(root: Path) -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (root / package).rglob("*.py")
        if "migrations" not in path.relative_to(root).parts
    )


def test_project_modules_are_imported_at_module_level():
    found = [line for path in _project_files(ROOT) for line in _nested_imports(path, ROOT, PACKAGES)]
    assert not found, (
        "project imports inside a function or class (move them to the top of the module; for a cycle "
        "inside one app import the module, `from app import module`, and use `module.name` at call time):\n"
        + "\n".join(found)
    )


def test_the_allowlist_names_places_that_still_exist():
    for where in ALLOWED:
        path, function = where.split(":")
        tree = ast.parse((ROOT / path).read_text())
        assert any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function
            for node in ast.walk(tree)
        ), f"{where} is allowlisted but no longer exists: remove it from ALLOWED"


def test_the_scan_sees_nested_imports_and_spares_ready(tmp_path):
    (tmp_path / "app").mkdir()
    module = tmp_path / "app" / "services.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "from app import models\n"
        "if TYPE_CHECKING:\n"
        "    from app.models import Thing\n"
        "def f():\n"
        "    import json\n"
        "    from app.tasks import t\n"
        "    from . import helpers\n"
        "class C:\n"
        "    def g(self):\n"
        "        import app.other\n"
    )
    apps = tmp_path / "app" / "apps.py"
    apps.write_text(
        "class AppConfig:\n"
        "    def ready(self):\n"
        "        from app import signals\n"
        "    def other(self):\n"
        "        from app import signals\n"
    )
    assert _nested_imports(module, tmp_path, ("app",)) == [
        "app/services.py:8: f: app.tasks",
        "app/services.py:9: f: .",
        "app/services.py:12: g: app.other",
    ]
    assert _nested_imports(apps, tmp_path, ("app",)) == ["app/apps.py:5: other: app"]
