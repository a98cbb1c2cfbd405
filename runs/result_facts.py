"""What a result was as the model got it, kept with the call for its span: tokens, bytes, the adapter that
produced it and its version, and its cost when the skill declares one. Written once for the gate's own
executions (runs/recording.py) and for results an agent's SDK reports (runs/client_exec.py)."""

from __future__ import annotations

import re
from importlib import metadata
from typing import Any

from lib import tokens
from runs.context_budget import result_tokens
from runs.models import ToolCall
from traces.cost import cost_of

SERVER_VERSION = metadata.version("airlock")
CLIENT_ADAPTER = "client"
_SDK_AGENT = re.compile(r"\bairlock-sdk/([0-9A-Za-z.+-]{1,40})")


def sdk_version(user_agent: str) -> str:
    """The Airlock SDK's version from a request's User-Agent (`airlock-sdk/0.1.0`); "" for another client."""
    found = _SDK_AGENT.search(user_agent or "")
    return f"airlock-sdk {found.group(1)}" if found else ""


def adapter_of(manifest: dict) -> str:
    return str((manifest.get("execution") or {}).get("adapter", "")).split(":", 1)[0]


def record_facts(*, call: ToolCall, manifest: dict, content: Any, adapter_version: str = "") -> dict:
    """Set the call's `result_tokens`; return what its decision keeps (`model_view`, `adapter`, `cost`)."""
    model = call.run.model
    call.result_tokens = result_tokens(content, model=model)
    adapter = adapter_of(manifest)
    facts: dict[str, Any] = {
        "model_view": {"tokens": call.result_tokens, "encoding": tokens.encoding_name(model)},
        "adapter": {
            "name": adapter,
            "version": adapter_version or ("" if adapter == CLIENT_ADAPTER else SERVER_VERSION),
        },
    }
    cost = cost_of(manifest.get("cost"), content=content, tokens=call.result_tokens)
    if cost:
        facts["cost"] = cost
    return facts


__all__ = ["SERVER_VERSION", "record_facts", "sdk_version"]
