"""What the registry asks the layers above it, which it never imports.

- `version_figures(skill_name=, since=, until=)`: calls, errors and latency of each version of a skill from
  the traces, `{version: VersionFigures}`, for the rollout view. Receiver: `traces.metrics.version_figures`
  (connected in traces.apps).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from lib.hooks import Hook


class VersionFigures(Protocol):
    def __call__(self, *, skill_name: str, since: datetime, until: datetime) -> dict[str, Any]: ...


version_figures: Hook[VersionFigures] = Hook("registry.hooks.version_figures")
