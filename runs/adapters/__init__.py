"""Adapters by URI scheme. `get_adapter(uri)` finds the one for a manifest's `execution.adapter`.

Other apps register more schemes (mcp://, client:) with `register_scheme`.
"""

from __future__ import annotations

from runs.adapters.base import Adapter, AdapterResult, InvocationContext
from runs.adapters.http import HttpAdapter
from runs.adapters.python import PythonAdapter
from runs.errors import Unavailable

_SCHEMES: dict[str, Adapter] = {"python:": PythonAdapter(), "http://": HttpAdapter(), "https://": HttpAdapter()}


def register_scheme(prefix: str, adapter: Adapter) -> None:
    _SCHEMES[prefix] = adapter


from runs.adapters.mcp import McpAdapter  # noqa: E402 - the execution plane's scheme (runs/plane/)

register_scheme("mcp://", McpAdapter())

from runs.adapters.confined import ConfinedAdapter  # noqa: E402 - code run in the sandbox executor (runs/plane/)

register_scheme("confined:", ConfinedAdapter())


def get_adapter(uri: str) -> Adapter:
    for prefix, adapter in _SCHEMES.items():
        if uri.startswith(prefix):
            return adapter
    raise Unavailable(f"No adapter handles {uri.split(':')[0]}: URIs.", code="no_adapter")


__all__ = ["Adapter", "AdapterResult", "InvocationContext", "get_adapter", "register_scheme"]
