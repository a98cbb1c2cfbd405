"""Logs as an attacker would read them: a query string, a message or a traceback carrying a secret is
written masked, by the real uvicorn access log and by every handler LOGGING configures."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from urllib.parse import urlencode

import httpx
import pytest
from django.conf import settings

from bench.common import free_port, uvicorn_command
from lib.log_redaction import MaskSecretsFilter, mask_logged_text

KEY, GITHUB, AWS, CARD = (
    "sk-live-4eC39HqLyjWDarjtT1zdp7dc",
    "ghp_9aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456",
    "AKIAZ7Q3EXAMPLEKEY12",
    "4111 1111 1111 1111",
)
QUERY = {"q": f"my key {KEY} and {AWS} card {CARD}", "api_key": "Zebra77Quartz", "token": GITHUB}
SECRETS = [KEY, GITHUB, AWS, CARD, CARD.replace(" ", ""), "Zebra77Quartz"]


def _record(msg: str, *args, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("x", logging.INFO, __file__, 1, msg, args or None, exc_info)


def _written(record: logging.LogRecord) -> str:
    MaskSecretsFilter().filter(record)
    return logging.Formatter().format(record)


def test_query_strings_are_masked_encoded_or_not():
    for path in (
        f"/api/v1/skills/search?{urlencode(QUERY)}",
        f"/api/v1/skills/search?q={KEY}&token={GITHUB}",
        "/x?q=" + KEY.replace("-", "%2D"),
    ):
        line = _written(_record('%s - "%s %s HTTP/%s" %d', "10.0.0.1:5", "GET", path, "1.1", 200))
        assert not [s for s in SECRETS if s in line], line
        assert line.startswith('10.0.0.1:5 - "GET /') and line.endswith('HTTP/1.1" 200')


def test_a_secret_split_between_template_and_argument_is_masked_and_numbers_still_format():
    line = _written(_record("login failed: password=%s after %d tries", "hunter2-Quokka", 3))
    assert "hunter2-Quokka" not in line and "after 3 tries" in line
    assert _written(_record("plain %s and %.1f", "text", 2.5)) == "plain text and 2.5"


def test_dicts_exceptions_and_tracebacks_are_masked():
    assert GITHUB not in _written(_record("payload %r", {"note": f"see {GITHUB}"}))
    try:
        raise RuntimeError(f"backend said token={GITHUB}")
    except RuntimeError:
        line = _written(_record("failed", exc_info=sys.exc_info()))
    assert "RuntimeError: backend said token=" in line and GITHUB not in line


def test_ordinary_lines_are_left_alone():
    assert (
        mask_logged_text('GET /api/v1/runs?after=3&wait=1.5 HTTP/1.1" 200')
        == 'GET /api/v1/runs?after=3&wait=1.5 HTTP/1.1" 200'
    )


def test_every_configured_handler_masks():
    """Read from the configuration, not the live loggers: an in-process uvicorn started by an earlier
    test reconfigures its own loggers (the subprocess test below checks what a real server writes)."""
    config = settings.LOGGING
    masking = {
        name for name, spec in config["filters"].items() if spec.get("()") == "lib.log_redaction.MaskSecretsFilter"
    }
    assert masking and config["handlers"]
    for name, handler in config["handlers"].items():
        assert masking & set(handler.get("filters", [])), f"handler {name} does not mask secrets"
    assert config["loggers"]["uvicorn.access"]["handlers"] == ["access"]


def test_the_real_uvicorn_access_log_masks_query_strings(tmp_path):
    """uvicorn configures its loggers first, then imports the app, which configures Django's LOGGING:
    the access lines it writes go through the masking filter."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "REDIS_URL": "",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "AIRLOCK_SIGNING_KEY": str(settings.AIRLOCK_SIGNING_KEY_FILE),
        "AIRLOCK_ACCESS_LOG": "1",  # off by default (make run's console); on, every line is masked
    }
    port = free_port()
    log_path = tmp_path / "uvicorn.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            uvicorn_command(port, "--lifespan", "off"),
            env=env,
            cwd=settings.BASE_DIR,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/api/v1/skills/search", params=QUERY, timeout=2)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        pytest.fail(f"uvicorn did not answer:\n{log_path.read_text()}")
                    time.sleep(0.2)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(10)
    written = log_path.read_text()
    assert "GET /api/v1/skills/search?q=" in written, written  # the access line is there
    assert [s for s in SECRETS if s in written] == [], written
