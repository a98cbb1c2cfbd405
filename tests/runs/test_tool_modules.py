"""A deployment's own in-process tools (issue 46): a package installed with an `airlock.tools` entry point is
loaded, its function published as a skill, granted and called through the gate; a module named in
AIRLOCK_TOOL_MODULES that cannot be imported stops the start with its name; and a deployment that does not
ask for the demo has no `demo.*` function at all."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from registry import services
from registry.contracts import contract_for
from registry.models import VersionStatus
from registry.snapshots import publish_snapshot
from runs.tool_modules import load_tools
from tests.registry.factories import manifest
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]

TOOLS = """
from runs.adapters.python import register


@register("acme_billing_tools.invoice_total", effect="read", teams=("support-tools",))
def invoice_total(*, arguments: dict, context) -> dict:
    return {"invoice": arguments["invoice_id"], "total_cents": 4200, "tenant": context.tenant}
"""


def install_distribution(where: Path) -> None:
    """A wheel-installed package as the packaging standard lays it out: the module and its .dist-info with
    the `airlock.tools` entry point, on sys.path (what `pip install` leaves in site-packages)."""
    (where / "acme_billing_tools").mkdir()
    (where / "acme_billing_tools" / "__init__.py").write_text(textwrap.dedent(TOOLS))
    info = where / "acme_billing_tools-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-billing-tools\nVersion: 1.0.0\n")
    (info / "entry_points.txt").write_text("[airlock.tools]\nbilling = acme_billing_tools\n")


def test_an_installed_packages_function_is_published_granted_and_called_through_the_gate(
    tmp_path, monkeypatch, settings, owner, acme, agent_client
):
    install_distribution(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    settings.AIRLOCK_DEMO, settings.AIRLOCK_TOOL_MODULES = False, []
    assert load_tools() == ["acme_billing_tools"]
    assert contract_for("python:acme_billing_tools.invoice_total").effect == "read"

    body = manifest(
        "finance.invoice_total",
        input_schema={
            "type": "object",
            "properties": {"invoice_id": {"type": "string", "pattern": "^inv_[0-9]+$"}},
            "required": ["invoice_id"],
            "additionalProperties": False,
        },
        output_schema={"type": "object"},
        execution__adapter="python:acme_billing_tools.invoice_total",
    )
    draft = services.create_draft_version(manifest=body, author=owner)
    published = services.publish_version(version=draft, user=owner)
    assert published.status == VersionStatus.ACTIVE
    publish_snapshot(reason="the deployment's own tool")
    grant(acme, "finance.*")

    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [call("c1", "finance.invoice_total", {"invoice_id": "inv_7"})])
    [answer] = result.json()["results"]
    assert answer["status"] == "ok", answer
    assert answer["content"] == {"invoice": "inv_7", "total_cents": 4200, "tenant": "acme"}


def test_a_tool_module_that_cannot_be_imported_stops_the_start_with_its_name(settings):
    settings.AIRLOCK_DEMO, settings.AIRLOCK_TOOL_MODULES = False, ["acme_tools_nowhere.module"]
    with pytest.raises(ImproperlyConfigured, match="AIRLOCK_TOOL_MODULES names acme_tools_nowhere.module"):
        load_tools()


def _declared_functions(**env: str) -> list[str]:
    script = "from registry.contracts import declared_functions; print(' '.join(c.name for c in declared_functions()))"
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings", **env}
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.split()


def test_a_deployment_without_the_demo_has_no_demo_function():
    without = _declared_functions(AIRLOCK_DEMO="0", AIRLOCK_TOOL_MODULES="")
    assert not [name for name in without if name.startswith("demo.")], without
    with_demo = _declared_functions(AIRLOCK_DEMO="1", AIRLOCK_TOOL_MODULES="")
    assert "demo.delete_user_permanently" in with_demo and "demo.get_order" in with_demo
