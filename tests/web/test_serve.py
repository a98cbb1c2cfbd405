"""`manage.py serve --demo` as `make run` starts it with REDIS_URL: the production process model named once, on
the first line; the logins and the new agent keys last, after the front door answers; no refused connection
logged by the front door while the servers load; and a request body over nginx's memory buffer answered by
the application through the front door that `serve` started (issue 44)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from django.conf import settings
from django.urls import reverse

from airlock.serving import free_port, front_door_binary
from tests.envscan import ROOT, clean_environ

pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(front_door_binary() is None, reason="needs nginx (apt-get install nginx-light)"),
]


def _wait_for(path, text: str, process: subprocess.Popen) -> str:
    deadline = time.monotonic() + 240
    while text not in (output := path.read_text()):
        assert process.poll() is None and time.monotonic() < deadline, output[-3000:]
        time.sleep(0.2)
    return output


def test_make_runs_serve_names_its_model_first_and_its_keys_last_and_passes_large_bodies(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_environ(
        os.environ,
        DEBUG="1",
        AIRLOCK_DEMO="1",
        DATABASE_URL=f"sqlite:///{tmp_path / 'airlock.sqlite3'}",
        REDIS_URL=settings.REDIS_URL.rsplit("/", 1)[0] + "/13",  # a database of its own
        AIRLOCK_VAR_DIR=str(tmp_path / "var"),
    )
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300)
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        serve = subprocess.Popen(
            [*manage, "serve", "--demo", "--no-simulate", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            output = _wait_for(log, "-" * 78 + "\n", serve)
            output = _wait_for(log, "a file each.\n" + "-" * 78, serve)
            lines = output.splitlines()
            assert lines[0].startswith(f"Airlock at {url}/: production process model")
            assert sum("process model" in line for line in lines) == 1
            ready = lines.index(f"Airlock is ready at {url}/   (Ctrl-C stops every process)")
            key = next(line.split()[-1] for line in lines[ready:] if line.startswith("  acme/support-bot"))
            assert not any(" ak_" in line for line in lines[:ready])
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as agent:
                run = agent.post(reverse("runs_api:run_create"), json={"end_user": "u-1", "task": "big body"})
                assert run.status_code == 201, run.text
                calls = [
                    {
                        "call_id": f"c{i}",
                        "name": "customer.read_profile",
                        "arguments": {"customer_id": "cus_ada100"},
                        "idempotency_key": f"serve-big-body-{i:04d}",
                    }
                    for i in range(50)
                ]
                body = json.dumps({"calls": calls, "exposed_tools": ["customer.read_profile"] * 200})
                assert len(body) > 11_000  # over nginx's in-memory body buffer (8 KB)
                answer = agent.post(
                    reverse("runs_api:run_calls", args=[run.json()["run_id"]]),
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                assert answer.status_code == 200, answer.text[:500]
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=60)
    output = log.read_text()
    assert "connect() failed" not in output and "Permission denied" not in output, output[-3000:]
