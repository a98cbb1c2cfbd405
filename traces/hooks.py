"""What the record (traces/) needs from the layer above it (runs/), which it never imports.

OTLP ingest links an agent's own spans to the runs and calls the gate recorded:

- `runs_by_id(tenant_id, ids)`: that tenant's runs with these ids, as a list of `Run` rows.
- `call_pks(run_ids, call_ids)`: `{(run_id, call_id): ToolCall pk}` for the calls among those runs.

Receivers: `runs.lookups.runs_by_id` and `runs.lookups.call_pks`, connected in `runs.apps.RunsConfig.ready()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lib.hooks import Hook

runs_by_id: Hook[Callable[[Any, list], list]] = Hook("traces.hooks.runs_by_id")
call_pks: Hook[Callable[[Iterable, Iterable], dict[tuple[Any, str], int]]] = Hook("traces.hooks.call_pks")
