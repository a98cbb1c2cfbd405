"""Client-executed skills: local Python functions that implement skills whose adapter is `client:`.

The gate still decides (allow, confirm, deny); on allow it answers `execute_locally` with a
short-lived token bound to the run, the call and the argument hash. The SDK then runs the
function here and posts the result back, and the gate shapes and traces it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ClientFunction = Callable[..., Any]


class ClientSkillRegistry:
    def __init__(self) -> None:
        self._functions: dict[str, ClientFunction] = {}

    def register(self, name: str, function: ClientFunction) -> ClientFunction:
        self._functions[name] = function
        return function

    def skill(self, name: str) -> Callable[[ClientFunction], ClientFunction]:
        """Decorator: `@airlock.client_skill("files.read_local")` registers the function for that skill.

        The function receives the call's arguments as keyword arguments and returns JSON-able
        content; an exception is reported to the gate as the call's error.
        """

        def decorate(function: ClientFunction) -> ClientFunction:
            return self.register(name, function)

        return decorate

    def get(self, name: str) -> ClientFunction | None:
        return self._functions.get(name)

    def names(self) -> list[str]:
        return sorted(self._functions)


default_registry = ClientSkillRegistry()
client_skill = default_registry.skill
