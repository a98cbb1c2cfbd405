from typing import Any

from django import template

register = template.Library()


@register.filter
def ms(value: Any) -> str:
    """A duration in milliseconds, in the unit a person reads fastest."""
    if value is None or value == "":
        return "—"
    value = float(value)
    if value < 1:
        return f"{value:.2f} ms"
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    return f"{value / 60_000:.1f} min"


@register.filter
def pct(value: Any) -> str:
    return "—" if value is None else f"{float(value) * 100:.1f}%"


@register.filter
def kb(value: Any) -> str:
    value = float(value or 0)
    return f"{value:.0f} B" if value < 1024 else f"{value / 1024:.1f} KiB"


@register.filter
def tokens(value: Any) -> str:
    value = float(value or 0)
    return f"{value:,.0f} tokens" if value < 10_000 else f"{value / 1000:,.1f}k tokens"


@register.filter
def money(value: Any, currency: str = "") -> str:
    """An amount with its currency code, with the precision a per-call price needs."""
    if value is None or value == "":
        return "—"
    value = float(value)
    figure = f"{value:,.2f}" if value >= 1 or value == 0 else f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{figure} {currency}".strip()


@register.filter
def pretty(value: Any) -> str:
    import json

    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=1, sort_keys=True, default=str)
    return str(value)


KIND_LABELS = {
    "run": "run",
    "model_turn": "model",
    "tool_call": "tool",
    "policy": "policy",
    "approval": "approval",
    "approval_request": "approval",
    "approval_decision": "decision",
    "execution_attempt": "attempt",
    "other": "span",
}


@register.filter
def kind_label(value: str) -> str:
    return KIND_LABELS.get(value, value)


@register.filter
def window(value: Any) -> str:
    """A timedelta as people say it: 15 min, 1 h, 7 d."""
    seconds = int(value.total_seconds()) if value else 0
    if seconds and seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"
