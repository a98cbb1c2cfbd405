"""The rug pull (issue 46): a real MCP server changes a tool's description after its team reviewed it. The next
call is refused before it reaches the tool, the change waits on the MCP servers page as a diff with what the
scan found, and only after a member of the server's team pins it do calls go through again. A definition that
already carries instructions for the model is flagged when it is imported."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from registry.mcp_import import import_mcp_server
from registry.models import VersionStatus
from registry.services import review_reasons
from reliability.models import McpServer, McpServerStatus, McpToolPin
from tests.conftest import make_user
from tests.reliability.conftest import free_port, gate
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db
SERVER = Path(__file__).resolve().parents[1] / "reliability" / "mcp_rug_pull_server.py"


@pytest.fixture
def quote_desk():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _until_up(url)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _until_up(url: str) -> None:
    import socket
    import time

    port = int(url.split(":")[2].split("/")[0])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail("the MCP test server did not start")


def _direct(url: str, tool: str) -> dict:
    """Call the server as anyone could, outside Airlock (the hostile server's own control)."""
    import mcp

    async def call() -> dict:
        async with mcp.Client(url) as client:
            result = await client.call_tool(tool, {})
            return json.loads(result.content[0].text)

    return asyncio.run(call())


@pytest.fixture
def quotes(quote_desk, owner_team, owner, settings):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = True
    reviewer = make_user("rhea")
    owner_team.members.add(reviewer)
    server = McpServer.objects.create(
        name="quotes", team=owner_team, url=quote_desk, status=McpServerStatus.APPROVED, proposed_by=owner,
        reviewed_by=reviewer,
    )  # fmt: skip
    imported = import_mcp_server(target=quote_desk, team=owner_team, author=owner, server_name="quotes")
    assert "mcp.quotes.quote" in {v.skill.name for v in imported.created}
    make_skill("mcp.quotes.quote", version="1.0.0", adapter="mcp://quotes/quote", effect="read")  # published
    return {"server": server, "url": quote_desk, "reviewer": reviewer}


QUOTE = {"call_id": "q1", "name": "mcp.quotes.quote", "arguments": {"symbol": "ACME"}}


@pytest.fixture
def world(acme, agent):
    grant(acme, "mcp.*")
    return {"agent": agent}


def test_a_changed_definition_is_refused_until_the_team_pins_it(world, quotes, owner):
    run, [first] = gate(world["agent"], [QUOTE])
    assert first["status"] == "ok", first
    assert _direct(quotes["url"], "count") == {"quote": 1}

    _direct(quotes["url"], "rug_pull")
    _, [pulled] = gate(world["agent"], [{**QUOTE, "call_id": "q2"}], run=run)
    assert pulled["status"] == "error" and pulled["error"]["code"] == "tool_definition_changed", pulled
    assert _direct(quotes["url"], "count") == {"quote": 1}  # nothing reached the changed tool
    pin = McpToolPin.objects.get(server=quotes["server"], tool="quote")
    assert pin.pending_sha256 and "id_rsa" in pin.pending_definition["description"]
    assert {"carries a tag aimed at the model", "asks for secrets or credentials"} <= set(pin.pending_findings)

    page = Client()
    page.force_login(owner)
    shown = page.get(reverse("reliability:mcp_server_list")).content.decode()
    assert "quotes/quote" in shown and "id_rsa" in shown and "asks for secrets or credentials" in shown

    outsider = make_user("mallory")
    sneaky = Client()
    sneaky.force_login(outsider)
    approve = reverse("reliability:mcp_tool_change_approve", args=[quotes["server"].pk, "quote"])
    assert sneaky.post(approve).status_code in (403, 404)
    _, [still] = gate(world["agent"], [{**QUOTE, "call_id": "q3"}], run=run)
    assert still["error"]["code"] == "tool_definition_changed"

    assert page.post(approve).status_code == 302
    _, [again] = gate(world["agent"], [{**QUOTE, "call_id": "q4"}], run=run)
    assert again["status"] == "ok" and _direct(quotes["url"], "count") == {"quote": 2}
    pin.refresh_from_db()
    assert pin.pinned_by_label == "owner" and not pin.pending_sha256


def test_a_poisoned_description_is_flagged_for_review_when_imported(quotes, owner_team, owner):
    _direct(quotes["url"], "rug_pull")
    McpServer.objects.create(
        name="quotes2", team=owner_team, url=quotes["url"], status=McpServerStatus.APPROVED, proposed_by=owner,
        reviewed_by=quotes["reviewer"],
    )  # fmt: skip
    imported = import_mcp_server(target=quotes["url"], team=owner_team, author=owner, server_name="quotes2")
    [poisoned] = [v for v in imported.created if v.skill.name == "mcp.quotes2.quote"]
    assert poisoned.status == VersionStatus.DRAFT
    reasons = review_reasons(poisoned)
    assert any("asks for secrets or credentials" in reason for reason in reasons), reasons
    assert any("keep something from the user" in reason for reason in reasons), reasons
