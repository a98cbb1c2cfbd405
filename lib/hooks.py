"""Typed hooks: how a lower layer tells a higher one something without importing it.

A hook is declared once, in the lower layer's `hooks` module, with the signature its receivers must
have; the higher layer connects its function, by import, in its `AppConfig.ready()`. A reader who
meets `hooks.open_approval(...)` jumps to the declaration, whose docstring names the receiver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class Hook(Generic[F]):
    """Exactly one receiver; calling the hook before one is connected is a wiring bug, so it raises."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.receiver: F | None = None

    def connect(self, receiver: F) -> F:
        if self.receiver is not None and self.receiver is not receiver:
            raise RuntimeError(f"Hook {self.name} already has a receiver ({self.receiver.__qualname__}).")
        self.receiver = receiver
        return receiver

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.receiver is None:
            raise RuntimeError(f"Hook {self.name} has no receiver: is its app in INSTALLED_APPS?")
        return self.receiver(*args, **kwargs)


class Signal(Generic[F]):
    """Any number of receivers, called in the order they connected; each is connected once."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.receivers: list[F] = []

    def connect(self, receiver: F) -> F:
        if receiver not in self.receivers:
            self.receivers.append(receiver)
        return receiver

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        for receiver in self.receivers:
            receiver(*args, **kwargs)
