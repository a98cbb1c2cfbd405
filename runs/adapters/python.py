"""`python:<name>`: functions registered in the project (`@register("demo.get_order")`); the demo's own
(runs/demo_tools.py) register when the runs app is ready (runs/apps.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runs.adapters.base import AdapterResult, InvocationContext
from runs.errors import Unavailable

_FUNCTIONS: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
        _FUNCTIONS[name] = function
        return function

    return decorator


def registered(name: str) -> Callable[..., Any] | None:
    return _FUNCTIONS.get(name)


class PythonAdapter:
    def invoke(self, *, manifest: dict, arguments: dict, context: InvocationContext) -> AdapterResult:
        name = manifest["execution"]["adapter"].removeprefix("python:")
        function = registered(name)
        if function is None:
            raise Unavailable(f"The function {name} is not registered in this deployment.", code="no_function")
        return AdapterResult(content=function(arguments=arguments, context=context))
