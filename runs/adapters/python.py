"""`python:<name>`: functions registered in the project with what they declare about themselves
(`@register("demo.get_order", effect="read", teams=("support-tools",))`); the demo's own (runs/demo_tools.py)
register when the runs app is ready (runs/apps.py). The declaration goes to the registry
(`registry.contracts`), which refuses a manifest that claims less than it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from registry.contracts import ANY_TEAM, FunctionContract, declare
from runs.adapters.base import AdapterResult, InvocationContext
from runs.errors import Unavailable

_FUNCTIONS: dict[str, Callable[..., Any]] = {}


def register(
    name: str,
    *,
    effect: str,
    approval: str = "not_required",
    teams: tuple[str, ...] = (ANY_TEAM,),
    sandbox_for: str = "",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make `function` callable as `python:<name>`, declaring its effect class, the approval it needs at
    least and the teams whose skills may run it. `sandbox_for` registers it as the sandbox of that function:
    what owners' tries call instead of it (registry.trials); only a function registered so is a sandbox."""
    contract = FunctionContract(name=name, effect=effect, approval=approval, teams=teams, sandbox_for=sandbox_for)

    def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
        declare(contract)
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
