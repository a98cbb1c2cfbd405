"""The outage drill (issue 37): a real Airlock process on PostgreSQL and Redis is killed with SIGKILL in the
middle of an agent's task, and comes back.

The agent reads through the gate, reads and writes its own `client:` skills, asks for a write a policy only
allows with a person's confirmation, and calls a server-side skill. While the server is dead the SDK decides
the allowed client-side calls from its signed decision bundle and spools them; the confirm and the
server-side call fail closed with the typed `unavailable`. Once the server answers again, every spooled
call is on the run's trace exactly once. Then the agent is revoked: its bundle still decides until its
`valid_until` (90 s here, so that revoking it through `manage.py shell` fits well within it on a busy
machine), and not one call after; what it decided after the revocation is uploaded flagged.

Everything is real: `manage.py migrate`, `seed_demo` and Granian's WSGI workers in their own process group
on a database of their own; the assertions read that database with plain SQL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import pytest
from airlock_sdk import Airlock, ClientSkillRegistry, Error, Ok
from django.conf import settings

from airlock.serving import free_port, web_command
from tests.envscan import ROOT, clean_environ
from tests.own_redis import REDIS_SERVER, OwnRedis

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
CEILING_S = 120  # generous: a busy machine is slow, never wrong

SETUP = """
import json
from datetime import timedelta
from django.core.management import call_command
from console.models import Tenant
from console.services import create_agent
from policies import services
from policies.models import Scope
from registry.snapshots import publish_snapshot
call_command("seed_demo", verbosity=0)
acme = Tenant.objects.get(slug="acme")
agent, key = create_agent(tenant=acme, name="drill-bot", role="support")
policy = services.create_policy(name="drill: refunds promised need a person", scope=Scope.TENANT, tenant=acme,
    created_by=None, rules=[{"id": "promise-refund", "verdict": "confirm",
    "condition": 'skill.name == "drafts.save_case_note" && args.note.contains("refund")',
    "reason": "A note promising a refund needs a person's confirmation."}])
services.publish_policy_version(version=services.draft_of(policy), user=None, reason="drill")
services.set_local_decisions(tenant=acme, agent_roles=["support"], bundle_validity=timedelta(minutes=10),
    by_label="drill")
publish_snapshot(reason="drill")
print(json.dumps({"key": key, "agent_id": agent.pk}))
"""
SHORT_VALIDITY = """
from datetime import timedelta
from console.models import Tenant
from policies import services
services.set_local_decisions(tenant=Tenant.objects.get(slug="acme"), agent_roles=["support"],
    bundle_validity=timedelta(seconds=90), by_label="drill")
"""
REVOKE = """
from console.models import Agent
from console.services import revoke_agent
revoke_agent(agent=Agent.objects.get(pk={agent_id}))
"""


@dataclass
class Server:
    """One Airlock web process group on its own database, killed and restarted at will."""

    env: dict[str, str]
    port: int
    log: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        return done.stdout.decode()

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                web_command("127.0.0.1", self.port, workers=1, threads=4),
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: SIGKILL reaches the workers too
            )
        deadline = time.monotonic() + CEILING_S
        while True:
            try:
                httpx.get(f"{self.url}/healthz", timeout=5)  # 503 without a Celery worker: it answers, it is up
                return
            except httpx.HTTPError:
                pass
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL, no goodbye: what a crashed host or an OOM kill does."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=CEILING_S)


def _database(name: str | None = None) -> dict:
    db = settings.DATABASES["default"]
    return {
        "host": db["HOST"] or "127.0.0.1",
        "port": db["PORT"] or 5432,
        "user": db["USER"],
        "password": db["PASSWORD"] or None,
        "dbname": name or "postgres",
        "autocommit": True,
    }


@pytest.fixture
def server(tmp_path) -> Iterator[Server]:
    """Its own database and its own Redis: the suite's snapshots, caches and Celery queue never meet its own."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    redis = OwnRedis()
    redis.start()
    name = f"airlock_drill_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(**_database()) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    db = _database(name)
    password = f":{db['password']}" if db["password"] else ""
    env = clean_environ(
        os.environ,
        DJANGO_SETTINGS_MODULE="console.settings",
        DEBUG="1",
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=f"postgres://{db['user']}{password}@{db['host']}:{db['port']}/{name}",
        REDIS_URL=redis.url,
        AIRLOCK_VAR_DIR=str(tmp_path / "var"),
        LOG_LEVEL="WARNING",
    )
    port = free_port()
    env["AIRLOCK_PUBLIC_URL"] = f"http://127.0.0.1:{port}"
    server = Server(env=env, port=port, log=tmp_path / "server.log")
    try:
        server.manage("migrate", "--noinput")
        yield server
    finally:
        if server.process is not None and server.process.poll() is None:
            server.kill()
        with psycopg.connect(**_database()) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        redis.stop()


def rows(server: Server, sql: str, *params) -> list[tuple]:
    name = server.env["DATABASE_URL"].rsplit("/", 1)[1]
    with psycopg.connect(**_database(name)) as db:
        return db.execute(sql, params).fetchall()


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + CEILING_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def valid_until_of(bundle) -> datetime:
    return datetime.fromisoformat(bundle.body["valid_until"])


def read_notes(customer_id: str) -> dict:
    return {"notes": [f"{customer_id} prefers e-mail"]}


NOTES_SAVED: list[dict] = []


def save_note(customer_id: str, note: str) -> dict:
    NOTES_SAVED.append({"customer_id": customer_id, "note": note})
    return {"note_id": f"n-{len(NOTES_SAVED)}"}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"call_id": call_id, "name": name, "arguments": arguments}


def test_the_outage_drill(server, tmp_path):
    created = json.loads(server.manage("shell", "-c", SETUP).strip().splitlines()[-1])
    server.start()
    skills = ClientSkillRegistry()
    skills.register("support.read_case_notes", read_notes)
    skills.register("drafts.save_case_note", save_note)
    airlock = Airlock(
        server.url,
        created["key"],
        cache_dir=tmp_path / "sdk",
        trust_dir=tmp_path / "trust",
        retries=1,
        timeout=30,
        client_skills=skills,
    )
    run = airlock.start_run(end_user="cus_ada100", task="Answer Ada about her refund")
    assert airlock.bundles.bundle is not None and airlock.bundles.bundle.body["local_decisions"] is True

    # Before the outage: a server-side read and a client-side read, both through the gate.
    before = run.call(
        [
            call("gate-1", "customer.read_profile", customer_id="cus_ada100"),
            call("gate-2", "support.read_case_notes", customer_id="c-100"),
        ]
    )
    assert all(isinstance(r, Ok) and not r.decided_locally for r in before), before

    server.kill()  # mid-task

    during = run.call(
        [
            call("local-1", "support.read_case_notes", customer_id="c-100"),
            call("local-2", "drafts.save_case_note", customer_id="c-100", note="asked about her order"),
            call("local-3", "drafts.save_case_note", customer_id="c-100", note="refund promised"),
            call("local-4", "customer.read_profile", customer_id="cus_ada100"),
        ]
    )
    allowed, written, confirm, server_side = during
    assert isinstance(allowed, Ok) and allowed.decided_locally and allowed.content["notes"]
    assert isinstance(written, Ok) and written.decided_locally
    for refused in (confirm, server_side):  # fail closed, typed, nothing ran
        assert isinstance(refused, Error) and refused.error_class == "unavailable", refused
        assert refused.code == "airlock_unreachable"
    assert [n["note"] for n in NOTES_SAVED] == ["asked about her order"]
    spooled = [c.call_id for c in airlock.spool.pending()]
    assert spooled == ["local-1", "local-2"]

    server.start()
    run.status()  # the first answer after the outage uploads the spool
    assert airlock.spool.pending() == []
    recorded = rows(
        server,
        "SELECT c.call_id, count(DISTINCT c.id), count(s.id) FROM runs_toolcall c "
        "LEFT JOIN traces_span s ON s.call_id = c.id WHERE c.run_id = %s GROUP BY c.call_id ORDER BY 1",
        uuid.UUID(run.run_id),
    )
    assert [(call_id, n) for call_id, n, _ in recorded] == [
        ("gate-1", 1),
        ("gate-2", 1),
        ("local-1", 1),
        ("local-2", 1),
    ]
    local_spans = rows(
        server,
        "SELECT s.name, s.started_at FROM traces_span s JOIN runs_toolcall c ON s.call_id = c.id "
        "WHERE c.run_id = %s AND c.call_id LIKE 'local-%%' ORDER BY s.started_at",
        uuid.UUID(run.run_id),
    )
    number = airlock.bundles.bundle.number
    assert [name for name, _ in local_spans] == [
        f"support.read_case_notes (decided locally under bundle {number})",
        f"drafts.save_case_note (decided locally under bundle {number})",
    ]
    airlock.flush_spool()  # uploading again is harmless
    assert rows(server, "SELECT count(*) FROM runs_toolcall WHERE run_id = %s", uuid.UUID(run.run_id)) == [(4,)]

    # A revoked agent's bundle decides until its valid_until, and not one call after.
    server.manage("shell", "-c", SHORT_VALIDITY)

    def fresh_window() -> bool:  # windows move every 45 s: take a bundle with a minute or more of its 90 s ahead
        return (valid_until_of(airlock.refresh_bundle()) - datetime.now(UTC)).total_seconds() > 60

    wait_for(fresh_window, "a bundle with most of its validity ahead")
    valid_until = valid_until_of(airlock.bundles.bundle)
    server.manage("shell", "-c", REVOKE.format(agent_id=created["agent_id"]))
    server.kill()
    (still,) = run.call([call("after-revoke-1", "support.read_case_notes", customer_id="c-100")])
    decided_at = datetime.now(UTC)
    assert decided_at < valid_until, "the revocation took longer than the bundle's validity on this machine"
    assert isinstance(still, Ok) and still.decided_locally  # revoked, but its bundle holds until valid_until
    wait_for(lambda: datetime.now(UTC) > valid_until, "the bundle's valid_until to pass")
    (expired,) = run.call([call("after-expiry", "support.read_case_notes", customer_id="c-100")])
    assert isinstance(expired, Error) and expired.code == "airlock_unreachable" and "expired" in expired.message

    server.start()
    report = airlock.flush_spool()  # the revoked agent's key still reports what it did
    assert report.recorded == ["after-revoke-1"] and report.flagged == ["after-revoke-1"]
    flag = rows(
        server,
        "SELECT l.flag_reason FROM runs_localdecision l JOIN runs_toolcall c ON l.call_id = c.id "
        "WHERE c.call_id = 'after-revoke-1'",
    )
    assert "Decided at" in flag[0][0] and "key was revoked" in flag[0][0]
    assert rows(server, "SELECT count(*) FROM runs_toolcall WHERE call_id = 'after-expiry'") == [(0,)]
    airlock.close()
