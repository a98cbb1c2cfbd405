"""docs/sdk.md's quickstarts run as written, offline: each Python block of "The quickstarts offline" runs in a
process of its own against a live server holding the demo (as `make run` seeds it), with the key the demo
printed and the frameworks' scripted models for the LLM (issue 44)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from airlock.demo import seed_all
from runs.models import Run, ToolCall
from tests.browser.conftest import asgi_live_server  # noqa: F401
from tests.envscan import ROOT

SECTION = re.search(r"^## The quickstarts offline.*?(?=^## )", (ROOT / "docs" / "sdk.md").read_text(), re.S | re.M)
SNIPPETS = re.findall(r"```python\n(.*?)```", SECTION.group(0), re.S) if SECTION else []


def test_the_section_holds_the_three_quickstarts():
    assert len(SNIPPETS) == 3
    assert "ScriptedModel" in SNIPPETS[1] and "GenericFakeChatModel" in SNIPPETS[2]


@pytest.mark.parametrize("snippet", SNIPPETS, ids=["plain", "openai-agents", "langgraph"])
def test_a_quickstart_runs_offline_against_the_demo(asgi_live_server, snippet, tmp_path):  # noqa: F811
    key = seed_all().new_keys["acme/support-bot"]
    env = {**os.environ, "AIRLOCK_URL": asgi_live_server.url, "AIRLOCK_KEY": key, "HOME": str(tmp_path)}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", snippet], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [run] = Run.objects.filter(task="Look up Ada's orders")
    calls = {call.name: call.status for call in ToolCall.objects.filter(run=run)}
    assert calls == {"customer.read_profile": "succeeded", "customer.list_orders": "succeeded"}, calls
    assert run.status == "completed"
