"""mcp://<server>/<tool> against a real MCP server (streamable HTTP, in a subprocess) and over stdio."""

import sys
import time
import uuid
from pathlib import Path

import pytest

from console.models import Team
from reliability.models import ReconciliationItem
from reliability.services import register_mcp_server, save_credential
from runs.models import CallStatus, ToolCall
from runs.plane import breakers
from runs.plane.mcp_servers import call_tool, connection_for
from tests.reliability.conftest import bind, free_port, gate, publish, skill
from traces.models import Span

pytestmark = pytest.mark.django_db
SERVER_SECRET = "server-level-secret-77"


def register_for_skills(**settings) -> None:
    """A platform admin's server, shared with support-tools, the team that owns these tests' skills."""
    register_mcp_server(**settings).shared_with.add(Team.objects.get(slug="support-tools"))


@pytest.fixture
def desk(world, mcp_url):
    register_for_skills(name="desk", transport="http", url=mcp_url, headers={"X-Server-Secret": SERVER_SECRET})
    return mcp_url


def counts() -> dict:
    return call_tool(connection_for("mcp://desk/counts", team="support-tools"), "counts", {}, timeout_s=10)


def one(agent, name, arguments, call_id="c1", run=None):
    run, results = gate(agent, [{"call_id": call_id, "name": name, "arguments": arguments}], run=run)
    return run, results[0]


def test_read_through_mcp_with_server_headers_kept_out_of_manifest_and_trace(world, desk):
    version = skill("desk.lookup", "mcp://desk/lookup", credential="desk_token")
    publish()
    save_credential(tenant=world["acme"], name="desk_token", value="tenant-token-1")
    bind(world["acme"], "desk_token", "desk.*", "mcp://desk")
    run, result = one(world["agent"], "desk.lookup", {"item_id": "i-1"})
    assert result["status"] == "ok"
    assert result["content"]["name"] == "Item i-1" and result["content"]["found"] is True
    assert "<script" not in result["content"]["html"] and "javascript:" not in result["content"]["html"]
    assert result["provenance"] == {
        "source": "desk.lookup@1.0.0",
        "adapter": "mcp",
        "untrusted": True,
        "active_content_removed": 3,
    }
    seen = counts()["headers"]
    assert seen == {"authorization": "Bearer tenant-token-1", "x-server-secret": SERVER_SECRET}
    assert desk not in str(version.manifest) and SERVER_SECRET not in str(version.manifest)
    spans = Span.objects.filter(trace__run=run)
    assert SERVER_SECRET not in str(list(spans.values_list("attributes", flat=True)))


def test_typed_not_found_variant_from_mcp_is_preserved(world, desk):
    schema = {"type": "object", "required": ["found"], "properties": {"found": {"type": "boolean"}}}
    skill("desk.lookup", "mcp://desk/lookup", output_schema=schema)
    publish()
    _, result = one(world["agent"], "desk.lookup", {"item_id": "missing-9"})
    assert result["status"] == "ok" and result["content"] == {"found": False, "item_id": "missing-9"}


def test_wrong_shape_from_mcp_is_a_contract_violation(world, desk):
    skill("desk.bad_shape", "mcp://desk/bad_shape", output_schema={"type": "object", "required": ["item_id"]})
    publish()
    run, result = one(world["agent"], "desk.bad_shape", {"item_id": "x"})
    assert result["error"]["code"] == "contract_violation" and result["error"]["class"] == "internal"
    assert Span.objects.get(trace__run=run, kind="execution_attempt").outcome == "contract_violation"


def test_slow_mcp_write_is_timeout_unknown_reconciled_through_the_tool_and_ran_once(world, desk):
    skill(
        "desk.create_note",
        "mcp://desk/create_note",
        effect="write",
        timeout_ms=800,
        max_attempts=3,
        idempotent=True,
        reconcile="mcp://desk/note_status",
    )
    publish()
    run, result = one(world["agent"], "desk.create_note", {"text": "slow"})
    assert result["error"]["class"] == "timeout_unknown"
    key = f"{run.pk}:c1"
    item = ReconciliationItem.objects.get(call__run=run)
    release = connection_for("mcp://desk/release", team="support-tools")
    call_tool(release, "release", {}, timeout_s=10)  # the slow write finishes
    deadline = time.monotonic() + 10
    while key not in counts()["notes"]:
        assert time.monotonic() < deadline, "the slow write never finished"
        time.sleep(0.05)
    from reliability.reconcile import check_with_tool

    item = check_with_tool(item_id=item.pk)
    assert item.resolution == "succeeded" and item.resolved_source == "tool"
    call = ToolCall.objects.get(run=run, call_id="c1")
    assert call.status == CallStatus.RECONCILED and call.result["content"]["text"] == "slow"
    assert counts()["executions"][f"create_note:{key}"] == 1


def test_unreachable_mcp_server_opens_the_breaker(world, db, settings):
    settings.AIRLOCK_BREAKER_OPEN_SECONDS = 600  # stays open however long a busy machine takes to look
    register_for_skills(name="gone", transport="http", url=f"http://127.0.0.1:{free_port()}/mcp")
    skill("gone.lookup", "mcp://gone/lookup", max_attempts=2)
    publish()
    run = None
    codes = []
    for i in range(3):
        run, result = one(world["agent"], "gone.lookup", {"item_id": "1"}, call_id=f"c{i}", run=run)
        codes.append(result["error"]["code"])
    assert codes[0] == "downstream_unreachable"
    assert codes[-1] == "circuit_open"
    assert breakers.state_of("mcp://gone") == "open"


def test_unknown_mcp_server_is_unavailable(world):
    skill("nowhere.lookup", "mcp://nowhere/lookup")
    publish()
    _, result = one(world["agent"], "nowhere.lookup", {"item_id": "1"})
    assert result["error"]["code"] == "unknown_server"


def test_stdio_server(world):
    script = Path(__file__).parents[1] / "registry" / "mcp_demo_server.py"
    register_for_skills(name="stdiodesk", transport="stdio", command=f"{sys.executable} {script}")
    skill("stdiodesk.get_ticket", "mcp://stdiodesk/get_ticket", timeout_ms=20000)
    publish()
    ticket = f"T-{uuid.uuid4().hex[:6]}"
    _, result = one(world["agent"], "stdiodesk.get_ticket", {"ticket_id": ticket})
    assert result["status"] == "ok", result
    assert result["content"] == {"ticket_id": ticket, "status": "open"}
