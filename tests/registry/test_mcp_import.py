"""Import from a real MCP server: in-process and as a stdio subprocess through the command."""

import sys
from io import StringIO

import pytest
from django.core.management import call_command

from console.models import Team
from registry.mcp_import import import_mcp_server
from registry.models import SkillVersion
from registry.services import ManifestInvalid, approve_version, confirm_imported_defaults, publish_version
from reliability.models import McpServer
from tests.registry.mcp_demo_server import server

pytestmark = pytest.mark.django_db


def registered(name: str, team) -> McpServer:
    """The server the drafts' adapters name, approved and owned by the importing team (registry/contracts.py)."""
    return McpServer.objects.create(name=name, team=team, url="https://desk.example/mcp", status="approved")


def test_import_creates_unconfirmed_drafts_with_annotation_defaults(owner_team, owner, platform_admin):
    registered("ticket_desk", owner_team)
    result = import_mcp_server(target=server, team=owner_team, author=owner)
    assert result.server == "ticket_desk"
    by_name = {v.skill.name: v for v in result.created}
    assert sorted(by_name) == [
        "mcp.ticket_desk.delete_ticket",
        "mcp.ticket_desk.get_ticket",
        "mcp.ticket_desk.notify_customer",
    ]
    read = by_name["mcp.ticket_desk.get_ticket"]
    assert read.status == "draft" and read.effect == "read" and read.skill.namespace == "mcp.ticket_desk"
    assert read.manifest["input_schema"]["additionalProperties"] is False
    assert read.manifest["execution"]["adapter"] == "mcp://ticket_desk/get_ticket"
    delete = by_name["mcp.ticket_desk.delete_ticket"]
    assert delete.effect == "destructive" and delete.manifest["risk"]["approval"] == "required"
    assert delete.imported_from["annotations"] == {"destructiveHint": True}
    assert by_name["mcp.ticket_desk.notify_customer"].effect == "external"
    with pytest.raises(ManifestInvalid) as caught:
        publish_version(version=read, user=owner)
    assert caught.value.errors[0]["code"] == "unconfirmed_import"
    confirm_imported_defaults(version=read, user=owner)
    published = publish_version(version=read, user=owner)  # a first version that leaves Airlock: a second person
    assert published.status == "in_review"
    assert published.review_reasons == [
        "first version sends calls to mcp://ticket_desk",
        "the namespace mcp.ticket_desk belongs to no team: a platform admin reviews its first skill",
    ]
    assert approve_version(version=published, user=platform_admin).status == "active"
    again = import_mcp_server(target=server, team=owner_team, author=owner)
    assert again.created == [] and len(again.skipped) == 3


def test_an_import_for_a_team_that_may_not_use_the_server_creates_nothing(owner_team, owner):
    result = import_mcp_server(target=server, team=owner_team, author=owner)  # no server named ticket_desk
    assert result.created == [] and {e["code"] for errors in result.failed.values() for e in errors} == {
        "unknown_server"
    }
    registered("ticket_desk", Team.objects.create(slug="growth", name="Growth"))
    result = import_mcp_server(target=server, team=owner_team, author=owner)
    assert result.created == [] and {e["code"] for errors in result.failed.values() for e in errors} == {
        "mcp_server_not_for_team"
    }


def test_a_server_named_with_a_hyphen_keeps_its_name_in_the_adapters(owner_team, owner):
    registered("ticket-desk", owner_team)
    result = import_mcp_server(target=server, team=owner_team, author=owner, server_name="ticket-desk")
    assert result.server == "ticket_desk"
    assert {v.skill.namespace for v in result.created} == {"mcp.ticket_desk"}
    assert {v.manifest["execution"]["adapter"].rsplit("/", 1)[0] for v in result.created} == {"mcp://ticket-desk"}


def test_command_imports_from_a_stdio_subprocess(owner_team):
    registered("desk", owner_team)
    out = StringIO()
    call_command(
        "import_mcp",
        f"{sys.executable} tests/registry/mcp_demo_server.py",
        team="support-tools",
        server_name="desk",
        stdout=out,
    )
    assert "3 draft(s) in mcp.desk" in out.getvalue()
    assert SkillVersion.objects.filter(skill__namespace="mcp.desk", defaults_confirmed=False).count() == 3


@pytest.fixture
def http_server_url():
    import socket
    import subprocess
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "tests/registry/mcp_demo_server.py", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_console_form_imports_over_streamable_http(client, platform_admin, owner_team, http_server_url):
    """A platform admin imports from any URL; teams from their approved servers (test_mcp_server_review.py)."""
    from django.urls import reverse

    from tests.conftest import login

    login(client, platform_admin)
    registered("helpdesk", owner_team)
    response = client.post(
        reverse("registry:import_mcp"), {"target": http_server_url, "team": "support-tools", "server_name": "helpdesk"}
    )
    assert response.status_code == 200, response.content.decode()[:2000]
    assert "mcp.helpdesk.delete_ticket" in response.content.decode()
    assert SkillVersion.objects.filter(skill__namespace="mcp.helpdesk").count() == 3
