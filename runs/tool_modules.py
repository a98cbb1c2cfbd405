"""Where a deployment's own in-process tools come from, loaded once when the runs app is ready.

A `python:` adapter names a function registered with its declaration (`runs.adapters.python.register`).
The modules that hold those `@register` calls are the deployment's choice: the ones named in
`AIRLOCK_TOOL_MODULES`, and every installed package's entry points in the `airlock.tools` group (the
packaging standard's plugin mechanism: `[project.entry-points."airlock.tools"] mytools = "mytools.tools"`).
The demo's functions (`runs.demo_tools`) load only in the demo (`AIRLOCK_DEMO`, on in the embedded default).
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

ENTRY_POINT_GROUP = "airlock.tools"
DEMO_MODULE = "runs.demo_tools"


def load_tools() -> list[str]:
    """Import every tool module of this deployment, in order; their names. A module that cannot be imported
    stops the start with its name, not a half-equipped Airlock."""
    loaded = []
    for name in [DEMO_MODULE] if settings.AIRLOCK_DEMO else []:
        import_module(name)
        loaded.append(name)
    for name in settings.AIRLOCK_TOOL_MODULES:
        try:
            import_module(name)
        except ImportError as exc:
            raise ImproperlyConfigured(f"AIRLOCK_TOOL_MODULES names {name}, which cannot be imported: {exc}") from exc
        loaded.append(name)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except ImportError as exc:
            package = entry.dist.name if entry.dist else "a package"
            raise ImproperlyConfigured(
                f"The {ENTRY_POINT_GROUP} entry point {entry.name} ({entry.value}) of {package} cannot be "
                f"imported: {exc}"
            ) from exc
        loaded.append(entry.value)
    return loaded


__all__ = ["DEMO_MODULE", "ENTRY_POINT_GROUP", "load_tools"]
