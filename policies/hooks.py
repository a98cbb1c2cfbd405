"""What policies/ needs from the layer above it (runs/), which it never imports.

- `recorded_calls()`: every recorded call that got a verdict, with its run, as a `ToolCall` queryset; the
  policy simulation narrows it by scope and replays it. Receiver: `runs.lookups.recorded_calls`,
  connected in `runs.apps.RunsConfig.ready()`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lib.hooks import Hook

recorded_calls: Hook[Callable[[], Any]] = Hook("policies.hooks.recorded_calls")
