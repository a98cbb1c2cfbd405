"""The sandbox executor (issue 46): tools written to escape run as `confined:` skills through the real gate, and
each attempt comes back as the sandbox's typed refusal while the server goes on unaffected."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from runs.adapters.confined import register_confined
from runs.plane import confinement
from tests.reliability.conftest import gate
from tests.runs.factories import grant, make_skill, run_for

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
ESCAPES = ["echo", "open_socket", "read_shadow", "read_server_environment", "write_outside", "fork_without_limit",
           "allocate", "spin", "sleep"]  # fmt: skip
for _name in ESCAPES:
    register_confined(f"escape.{_name}", entry=f"tests.runs.confined_escapes:{_name}", effect="read")


@pytest.fixture(autouse=True)
def needs_bubblewrap():
    if shutil.which("bwrap") is None:
        if os.environ.get("AIRLOCK_REQUIRE_SERVICES") == "1":
            pytest.fail("needs bubblewrap (apt-get install -y bubblewrap)", pytrace=False)
        pytest.skip("needs bubblewrap (apt-get install -y bubblewrap)")


@pytest.fixture
def confined(acme, agent):
    grant(acme, "escape.*")
    limits = {"cpu_seconds": 1, "memory_mb": 512, "processes": 16, "file_mb": 1}
    for name in ESCAPES:
        make_skill(
            f"escape.{name}",
            adapter=f"confined:escape.{name}",
            publish=False,
            timeout_ms=8000,
            schema={"type": "object"},
            extra={},
        ).manifest["execution"]["limits"] = limits
    from registry.models import SkillVersion
    from registry.snapshots import publish_snapshot

    for version in SkillVersion.objects.filter(skill__name__startswith="escape."):
        version.manifest["execution"]["limits"] = limits
        version.save(update_fields=["manifest"])
    publish_snapshot(reason="escape tools")
    return run_for(agent)


def call(run, agent, name: str, arguments: dict | None = None) -> dict:
    _, [result] = gate(agent, [{"call_id": f"c-{name}-{len(arguments or {})}", "name": f"escape.{name}",
                                "arguments": arguments or {}}], run=run)  # fmt: skip
    return result


def test_a_confined_tool_runs_as_nobody_with_no_environment(confined, agent, monkeypatch):
    monkeypatch.setenv("AIRLOCK_CANARY_SECRET", "s3cr3t-canary")
    result = call(confined, agent, "echo", {"say": "hi"})
    assert result["status"] == "ok", result
    content = result["content"]
    assert content["echo"] == {"say": "hi"} and content["tenant"] == "acme" and content["uid"] == 65534
    assert "AIRLOCK_CANARY_SECRET" not in content["env"] and "DATABASE_URL" not in content["env"]


@pytest.mark.parametrize(
    ("escape", "arguments", "code"),
    [
        ("open_socket", {"host": "1.1.1.1", "port": 443}, "sandbox_network_off"),
        ("read_shadow", {}, "sandbox_denied"),
        ("write_outside", {"path": str(ROOT / "escaped-from-the-sandbox.txt")}, "sandbox_denied"),
        ("fork_without_limit", {}, "sandbox_process_limit"),
        ("allocate", {"megabytes": 2048}, "sandbox_memory_limit"),
        ("spin", {}, "sandbox_time_limit"),
        ("sleep", {"seconds": 60}, "sandbox_time_limit"),
    ],
)
def test_each_escape_is_refused_with_a_typed_result(confined, agent, escape, arguments, code):
    result = call(confined, agent, escape, arguments)
    assert result["status"] == "error" and result["error"]["code"] == code, result
    assert not (ROOT / "escaped-from-the-sandbox.txt").exists()
    from traces.models import Span

    span = Span.objects.filter(trace__run=confined, kind="tool_call").order_by("-started_at").first()
    assert span.attributes["airlock.error.code"] == code
    after = call(confined, agent, "echo", {"after": escape})  # the server goes on
    assert after["status"] == "ok"


def test_the_server_on_this_machine_is_out_of_reach(confined, agent):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        result = call(confined, agent, "open_socket", {"host": "127.0.0.1", "port": port})
    assert result["error"]["code"] == "sandbox_network_off"


def test_the_servers_environment_cannot_be_read_from_proc(confined, agent, monkeypatch):
    monkeypatch.setenv("AIRLOCK_CANARY_SECRET", "s3cr3t-canary")
    result = call(confined, agent, "read_server_environment")
    assert result["status"] == "ok"
    assert "s3cr3t-canary" not in str(result["content"])
    # its own PID namespace: only the sandbox's own few processes are there to read, never the server's
    assert len([pid for pid in result["content"] if pid != "own"]) <= 3, result["content"]


def test_without_bubblewrap_a_confined_tool_never_runs_unconfined(confined, agent, settings):
    settings.AIRLOCK_BWRAP = "/nonexistent/bwrap"
    result = call(confined, agent, "echo", {"say": "hi"})
    assert result["error"]["code"] == "sandbox_unavailable"
    assert confinement.bubblewrap() is None
