"""The home dashboard's live counts: each app's card function, called in this order with the user."""

from collections.abc import Callable

from approvals.dashboard import notification_failure_cards, pending_cards
from console.dashboard import tenant_cards
from runs.dashboard import call_cards
from traces.dashboard import trace_cards

# Each takes the user and returns a list of card dicts ({"label", "value", "hint", "url"}).
CARD_SOURCES: list[Callable[..., list[dict]]] = [
    tenant_cards,
    pending_cards,
    notification_failure_cards,
    call_cards,
    trace_cards,
]


def cards_for(user) -> list[dict]:
    return [card for source in CARD_SOURCES for card in source(user)]
