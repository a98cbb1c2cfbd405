"""A skill of one team tries to call another team's MCP server, with that team's credentials, as a read.

The review's attack: sam (support-tools) writes a draft whose adapter is `mcp://growth-srv/drop_all_customers`
and whose effect is `read`. growth-srv belongs to the growth team and its sealed headers carry growth's
`Authorization`. An `mcp://` adapter may name only an approved server of the skill's own team, or one that
team was explicitly shared (by a maintainer of the owner, or a platform admin), and only a tool imported from
it. The draft is refused when stored and when published; a version that reached the database anyway is
refused at execution before anything is sent: a real local HTTP server stands in for growth's and must
receive nothing, in particular no Authorization header.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client
from django.urls import reverse
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from rest_framework.test import APIClient

from console.models import Team
from registry.mcp_import import import_mcp_server
from registry.models import Skill, SkillVersion, VersionStatus
from reliability.models import McpServer, McpServerEvent, McpServerStatus
from reliability.services import share_mcp_server, unshare_mcp_server
from runs.errors import CallError
from runs.gate import process_batch
from runs.plane.asking import ask
from tests.conftest import make_user
from tests.runs.factories import grant, make_skill, manifest, run_for

pytestmark = pytest.mark.django_db
GROWTH_SECRET = "Bearer growth-only-secret-31"
ATTACK = "mcp://growth-srv/drop_all_customers"
CLOSED = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass
class Recorder:
    """A real local HTTP server that records every request, whatever its method, and answers 400."""

    requests: list[dict] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/mcp"

    def start(self) -> Recorder:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                recorder.requests.append({"method": self.command, "headers": dict(self.headers.items())})
                self.send_response(400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_DELETE = do_PUT = _record  # noqa: N815 - http.server's naming

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder(settings):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = True
    settings.AIRLOCK_EGRESS_PORTS = None  # the recorder listens on a free port
    server = Recorder().start()
    yield server
    server.stop()


@pytest.fixture
def growth(db) -> dict:
    team = Team.objects.create(slug="growth", name="Growth")
    gina, gary = make_user("gina"), make_user("gary")  # gina maintains growth; gary is only a member
    team.members.add(gina, gary)
    team.maintainers.add(gina)
    return {"team": team, "gina": gina, "gary": gary}


@pytest.fixture
def growth_srv(growth, recorder) -> McpServer:
    server = McpServer(
        name="growth-srv",
        team=growth["team"],
        url=recorder.url,
        status=McpServerStatus.APPROVED,
        proposed_by=growth["gina"],
        reviewed_by=growth["gary"],
    )
    server.set_headers({"Authorization": GROWTH_SECRET})
    server.save()
    return server


def growth_tools() -> MCPServer:
    """What growth's server lists when its tools are imported."""
    tools = MCPServer("Growth")

    @tools.tool(annotations=ToolAnnotations(destructive_hint=True))
    def drop_all_customers() -> str:
        """Delete every customer record of the account. Irreversible."""
        return "dropped"

    return tools


def attack(name: str = "support.customer_cleanup", **changes) -> dict:
    body = manifest(name, adapter=ATTACK, effect="read", schema=CLOSED)
    body["ownership"]["team"] = "support-tools"
    body["risk"].update(changes)
    return body


def api(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def errors_of(response) -> dict[str, str]:
    return {error["code"]: error["message"] for error in response.json()["error"]["errors"]}


def test_naming_another_teams_server_is_refused_when_stored_and_when_published(owner, growth_srv):
    response = api(owner).post(reverse("registry_api:skills"), {"manifest": attack()}, format="json")
    assert response.status_code == 400
    message = errors_of(response)["mcp_server_not_for_team"]
    assert "growth-srv" in message and "growth" in message.replace("growth-srv", "")
    assert not Skill.objects.filter(name="support.customer_cleanup").exists()

    # A draft that got in some other way (stored before this check existed) is refused when published.
    draft = make_skill(
        "support.customer_cleanup", status=VersionStatus.DRAFT, publish=False, adapter=ATTACK, schema=CLOSED
    )
    response = api(owner).post(
        reverse("registry_api:version-publish", args=["support.customer_cleanup", "1.0.0"]), format="json"
    )
    assert response.status_code == 400 and "mcp_server_not_for_team" in errors_of(response)
    draft.refresh_from_db()
    assert draft.status == VersionStatus.DRAFT


def test_a_tool_never_imported_is_refused_even_from_a_shared_server(owner, growth, growth_srv):
    share_mcp_server(server=growth_srv, team=Team.objects.get(slug="support-tools"), by=growth["gina"])
    response = api(owner).post(reverse("registry_api:skills"), {"manifest": attack()}, format="json")
    assert response.status_code == 400
    errors = errors_of(response)
    assert set(errors) == {"unknown_mcp_tool"}
    assert "drop_all_customers" in errors["unknown_mcp_tool"] and "import" in errors["unknown_mcp_tool"]


def test_shared_and_imported_the_tool_is_held_to_its_annotations_and_passes(owner, growth, growth_srv):
    share_mcp_server(server=growth_srv, team=Team.objects.get(slug="support-tools"), by=growth["gina"])
    imported = import_mcp_server(
        target=growth_tools(), team=growth["team"], author=growth["gina"], server_name="growth-srv"
    )
    assert [v.manifest["execution"]["adapter"] for v in imported.created] == [ATTACK]

    as_read = api(owner).post(reverse("registry_api:skills"), {"manifest": attack()}, format="json")
    assert as_read.status_code == 400 and set(errors_of(as_read)) == {"effect_below_declaration"}

    honest = attack(effect="destructive", approval="required")
    stored = api(owner).post(reverse("registry_api:skills"), {"manifest": honest}, format="json")
    assert stored.status_code == 201, stored.content
    published = api(owner).post(
        reverse("registry_api:version-publish", args=["support.customer_cleanup", "1.0.0"]), format="json"
    )
    assert published.status_code == 200, published.content
    assert published.json()["status"] == VersionStatus.IN_REVIEW  # a first version that leaves Airlock


def test_only_a_maintainer_of_the_owning_team_shares_its_server(
    client, growth, growth_srv, owner, outsider, tenant_admin, platform_admin
):
    share = reverse("reliability:mcp_server_share", args=[growth_srv.pk])
    unshare = reverse("reliability:mcp_server_unshare", args=[growth_srv.pk])
    refused = {growth["gary"]: 403, owner: 404, outsider: 404, tenant_admin: 404}
    for user, status in refused.items():
        attacker = Client()
        attacker.force_login(user)
        assert attacker.post(share, {"team": "support-tools"}).status_code == status, user.username
    assert not growth_srv.shared_with.exists() and not McpServerEvent.objects.exists()

    gina = Client()
    gina.force_login(growth["gina"])
    assert gina.get(share).status_code == 405
    assert gina.post(share, {"team": "support-tools"}).status_code == 302
    assert list(growth_srv.shared_with.values_list("slug", flat=True)) == ["support-tools"]
    page = gina.get(reverse("reliability:mcp_server_list")).content.decode()
    assert 'id="shares-growth-srv"' in page and "support-tools" in page

    gary = Client()
    gary.force_login(growth["gary"])
    assert gary.post(unshare, {"team": "support-tools"}).status_code == 403
    assert growth_srv.shared_with.exists()
    assert gina.post(unshare, {"team": "support-tools"}).status_code == 302
    assert not growth_srv.shared_with.exists()

    root = Client()
    root.force_login(platform_admin)
    assert root.post(share, {"team": "support-tools"}).status_code == 302
    assert list(McpServerEvent.objects.order_by("pk").values_list("action", "team_label", "actor_label")) == [
        ("shared", "support-tools", "gina"),
        ("unshared", "support-tools", "gina"),
        ("shared", "support-tools", platform_admin.username),
    ]


def test_a_stored_version_cannot_send_another_teams_credentials(acme, agent, owner_team, growth, growth_srv, recorder):
    """Created with the ORM, as a version stored before the check existed would be: refused before sending."""
    grant(acme, "support.*")
    make_skill("support.customer_cleanup", adapter=ATTACK)
    run = run_for(agent)

    def call(call_id: str) -> dict:
        return process_batch(
            run=run, calls=[{"call_id": call_id, "name": "support.customer_cleanup", "arguments": {}}]
        )[0]

    refused = call("c1")
    assert refused["error"]["code"] == "mcp_server_not_for_team", refused
    assert "growth-srv" in refused["error"]["message"]
    with pytest.raises(CallError) as asked:  # asking about earlier work goes to the same server
        ask(manifest=attack(), target="mcp://growth-srv/status", field="job_id", value="j1", tenant_slug="acme")
    assert asked.value.code == "mcp_server_not_for_team"
    assert recorder.requests == []

    # Once growth shares it, the call does reach the server (the refusal above was not a network failure)...
    share_mcp_server(server=growth_srv, team=owner_team, by=growth["gina"])
    call("c2")
    assert recorder.requests and recorder.requests[0]["headers"].get("Authorization") == GROWTH_SECRET
    # ...and once growth takes the share back, nothing more is sent.
    unshare_mcp_server(server=growth_srv, team=owner_team, by=growth["gina"])
    seen = len(recorder.requests)
    assert call("c3")["error"]["code"] == "mcp_server_not_for_team"
    assert len(recorder.requests) == seen
    assert SkillVersion.objects.get(skill__name="support.customer_cleanup").status == VersionStatus.ACTIVE
