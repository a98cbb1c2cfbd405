"""`confined:<name>`: a deployment's tool whose code runs in the sandbox executor (runs/plane/confinement.py), not
in Airlock's process. Registered with its contract like a `python:` function, plus where its code is:

    register_confined("acme.render_chart", entry="acme_tools.charts:render", effect="read")

`entry` is `module:function` as the child process imports it (no Airlock or Django import there: the tool's
module stands alone). The manifest's `execution.limits` (`cpu_seconds`, `memory_mb`, `processes`, `file_mb`)
bound each call; its wall clock is the call's timeout.
"""

from __future__ import annotations

from dataclasses import asdict

from registry.contracts import ANY_TEAM, FunctionContract, declare
from runs.adapters.base import AdapterResult, InvocationContext
from runs.errors import Unavailable
from runs.plane import confinement

_ENTRIES: dict[str, str] = {}


def register_confined(
    name: str, *, entry: str, effect: str, approval: str = "not_required", teams: tuple[str, ...] = (ANY_TEAM,)
) -> None:
    """Declare `confined:<name>`: its contract for the registry, and the code the sandbox runs for it."""
    if ":" not in entry:
        raise ValueError(f"{name}: entry must be module:function, not {entry!r}.")
    declare(FunctionContract(name=name, effect=effect, approval=approval, teams=teams, confined=True))
    _ENTRIES[name] = entry


class ConfinedAdapter:
    def invoke(self, *, manifest: dict, arguments: dict, context: InvocationContext) -> AdapterResult:
        name = manifest["execution"]["adapter"].removeprefix("confined:")
        entry = _ENTRIES.get(name)
        if entry is None:
            raise Unavailable(f"The confined tool {name} is not registered in this deployment.", code="no_function")
        content = confinement.run(
            entry=entry,
            arguments=arguments,
            context={key: value for key, value in asdict(context).items() if isinstance(value, str | int | float)},
            limits=confinement.Limits.of(manifest, timeout_s=context.timeout_s or 10),
        )
        return AdapterResult(content=content)


__all__ = ["ConfinedAdapter", "register_confined"]
