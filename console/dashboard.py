"""The home dashboard's live counts. Each app contributes a function returning cards for a user."""

from collections.abc import Callable
from importlib import import_module

# "module:function" paths; each function takes the user and returns a list of card dicts
# ({"label", "value", "hint", "url"}). Apps add theirs here as they gain the data.
CARD_SOURCES: list[str] = [
    "console.dashboard:tenant_cards",
    "approvals.dashboard:pending_cards",
    "runs.dashboard:call_cards",
    "traces.dashboard:trace_cards",
]


def tenant_cards(user) -> list[dict]:
    from console.tenancy import tenants_for

    tenants = tenants_for(user)
    return [{"label": "Tenants", "value": tenants.count(), "hint": ", ".join(t.slug for t in tenants[:5])}]


def cards_for(user) -> list[dict]:
    cards: list[dict] = []
    for source in CARD_SOURCES:
        module_name, function_name = source.split(":")
        source_function: Callable = getattr(import_module(module_name), function_name)
        cards.extend(source_function(user))
    return cards
