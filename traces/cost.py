"""What a call cost, when its skill declares a price (`cost` in the manifest; registry/manifest.schema.json).

`per_call` is charged once per successful call; `per_unit` once per unit of the result as the model got
it: `item` (the items of a list result, or of its longest list) or `1k_tokens` (thousands of its tokens).
Both may be declared; the amount is their sum, in the declared currency. Only what the skill's owners
declare is shown: Airlock does not guess a price.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

UNITS = ("item", "1k_tokens")


def _items(content: Any) -> int:
    if isinstance(content, list):
        return len(content)
    if isinstance(content, dict):
        return max((len(value) for value in content.values() if isinstance(value, list)), default=0)
    return 0


def cost_of(declared: dict | None, *, content: Any, tokens: int) -> dict | None:
    """{"amount", "currency", "units"?, "unit"?} for a call's result; None when the skill declares no cost."""
    if not isinstance(declared, dict) or not ({"per_call", "per_unit"} & declared.keys()):
        return None
    amount = Decimal(str(declared.get("per_call", 0)))
    priced: dict[str, Any] = {"currency": declared.get("currency", "USD")}
    if "per_unit" in declared:
        unit = declared.get("unit", "item")
        units = Decimal(tokens) / 1000 if unit == "1k_tokens" else Decimal(_items(content))
        amount += Decimal(str(declared["per_unit"])) * units
        priced.update(unit=unit, units=float(units))
    priced["amount"] = float(round(amount, 6))
    return priced


def span_attributes(priced: dict | None) -> dict[str, Any]:
    """The span attributes of what `cost_of` priced."""
    if not priced:
        return {}
    attributes = {"airlock.cost.amount": priced["amount"], "airlock.cost.currency": priced["currency"]}
    if "unit" in priced:
        attributes.update({"airlock.cost.unit": priced["unit"], "airlock.cost.units": priced["units"]})
    return attributes


__all__ = ["UNITS", "cost_of", "span_attributes"]
