"""The console's home dashboard card (airlock.dashboard lists every app's)."""

from console.tenancy import tenants_for


def tenant_cards(user) -> list[dict]:
    tenants = tenants_for(user)
    return [{"label": "Tenants", "value": tenants.count(), "hint": ", ".join(t.slug for t in tenants[:5])}]
