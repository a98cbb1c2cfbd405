"""`seed_demo`: every app's demo data, in dependency order. Each seeder is idempotent, so `seed_demo`
can run at every `make run`; each takes the shared `console.demo.DemoContext`."""

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

from approvals.demo import seed as seed_approvals
from console.demo import DemoContext
from console.demo import seed as seed_console
from policies.demo import seed as seed_policies
from registry.contracts import contract_for
from registry.demo import seed as seed_registry
from runs.demo import seed as seed_runs

DEMO_SEEDERS: list[Callable[[DemoContext], None]] = [
    seed_console,
    seed_registry,
    seed_policies,
    seed_runs,
    seed_approvals,
]


def seed_all() -> DemoContext:
    if contract_for("python:demo.get_order") is None:
        raise ImproperlyConfigured(
            "The demo's tools are not loaded in this deployment: seed_demo needs AIRLOCK_DEMO=1 (on by itself in "
            "the embedded default that `make run` starts)."
        )
    context = DemoContext()
    for seed in DEMO_SEEDERS:
        seed(context)
    return context
