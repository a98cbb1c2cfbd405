"""What the registry asks of the layers above it, which it never imports.

- `version_figures(skill_name=, since=, until=)`: calls, errors and latency of each version of a skill from
  the traces, `{version: VersionFigures}`, for the rollout view. Receiver: `traces.metrics.version_figures`
  (connected in traces.apps).
- `run_skill_tests(version=, trigger=, user=)`: run a version's manifest `tests` through the gate's own
  validation, policy and execution, against its sandbox, and record a `SkillTestRun`, which it returns.
  Receiver: `runs.trials.run_skill_tests` (connected in runs.apps). `publish_version` calls it before a
  version with tests may leave draft.
- `mcp_server_refusal(server=, team_slug=)`: why skills of `team_slug` may not name the MCP server `server`
  (unknown, not approved, or another team's and not shared with this one), as `(code, message)`, or None.
  Receiver: `runs.plane.mcp_servers.access_refusal` (connected in runs.apps), the rule execution applies
  again before every connection. `contracts.contract_problems` asks it when a version is stored and published.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from lib.hooks import Hook

if TYPE_CHECKING:
    from registry.models import SkillTestRun, SkillVersion


class VersionFigures(Protocol):
    def __call__(self, *, skill_name: str, since: datetime, until: datetime) -> dict[str, Any]: ...


class RunSkillTests(Protocol):
    def __call__(self, *, version: SkillVersion, trigger: str, user: Any) -> SkillTestRun: ...


class McpServerRefusal(Protocol):
    def __call__(self, *, server: str, team_slug: str) -> tuple[str, str] | None: ...


version_figures: Hook[VersionFigures] = Hook("registry.hooks.version_figures")
run_skill_tests: Hook[RunSkillTests] = Hook("registry.run_skill_tests")
mcp_server_refusal: Hook[McpServerRefusal] = Hook("registry.hooks.mcp_server_refusal")
