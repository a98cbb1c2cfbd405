"""What the console tells the apps above it (lib.hooks explains the mechanism)."""

from __future__ import annotations

from collections.abc import Callable

from lib.hooks import Signal

incident_control_applied: Signal[Callable[..., None]] = Signal("incident_control_applied")
"""`(action: OperatorAction, agent: Agent | None)`: an agent was suspended or resumed (`agent` set), or its
tenant frozen or unfrozen (`agent` None). runs.incident_spans puts it on the trace of every open run it
touches."""
