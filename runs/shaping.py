"""Result shaping: redact a result (fields the skill's `output_schema` marks sensitive, credentials by
key, secret-looking strings), then keep it within the skill's `result_limit_bytes`, and say so when cut.
Every tool result passes here before the agent gets it and before it is stored."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from traces.redaction import redact

DEFAULT_LIMIT = 65_536


@dataclass
class Shaped:
    content: Any
    size: int
    truncated: bool = False
    truncation: dict = field(default_factory=dict)
    raw_size: int = 0
    redacted: bool = False

    @property
    def summary(self) -> dict:
        """What shaping did, kept with the call (ToolCall.decision["shaping"]) for its "why" panel."""
        summary = {"bytes_in": self.raw_size, "bytes_out": self.size, "redacted": self.redacted}
        if self.truncated:
            summary.update(
                {
                    key: self.truncation[key]
                    for key in ("cut", "limit_bytes", "original_bytes")
                    if key in self.truncation
                }
            )
        return summary


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def _fit_list(items: list, budget: int) -> list:
    kept: list = []
    used = 2
    for item in items:
        item_size = _size(item) + 1
        if used + item_size > budget:
            break
        kept.append(item)
        used += item_size
    return kept


def _without_nul(value: Any) -> Any:
    """NUL replaced in every string (keys included): PostgreSQL cannot store it in JSON, so a tool that answers
    with one would fail its call instead of giving its result."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    return value


def shape(content: Any, limit: int | None, *, output_schema: dict | None = None) -> Shaped:
    """Redacted first, in one pass, so that a cut never leaves half a secret unrecognised."""
    dumped = json.dumps(content, separators=(",", ":"), ensure_ascii=False, default=str)
    raw_size = len(dumped.encode())
    nul = "\\u0000" in dumped  # how json.dumps writes a NUL (a literal backslash-u0000 only costs the walk)
    if nul:
        content = _without_nul(content)
    redacted = redact(content, schema=output_schema if isinstance(output_schema, dict) else None)
    changed = redacted != content or nul
    content = redacted
    limit = limit or DEFAULT_LIMIT
    size = _size(content) if changed else raw_size
    if size <= limit:
        return Shaped(content=content, size=size, raw_size=raw_size, redacted=changed)
    budget = max(limit - 200, 16)  # room for the explicit note
    if isinstance(content, list):
        kept = _fit_list(content, budget)
        note = {"cut": "items", "returned_items": len(kept), "total_items": len(content)}
        cut: Any = kept
    elif isinstance(content, dict) and any(isinstance(v, list) for v in content.values()):
        key = max((k for k, v in content.items() if isinstance(v, list)), key=lambda k: _size(content[k]))
        rest = {k: v for k, v in content.items() if k != key}
        kept = _fit_list(content[key], budget - _size(rest))
        cut = {**rest, key: kept}
        note = {
            "cut": f"items of '{key}'",
            "items_field": key,  # where the rest is, for the pages that follow (runs.pagination)
            "returned_items": len(kept),
            "total_items": len(content[key]),
        }
    else:
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
        cut = text.encode()[:budget].decode(errors="ignore")
        note = {"cut": "text", "returned_chars": len(cut), "total_chars": len(text)}
    note.update(
        {
            "limit_bytes": limit,
            "original_bytes": size,
            "message": (
                f"Result cut to fit {limit} bytes ({note['cut']}: "
                f"{note.get('returned_items', note.get('returned_chars'))} of "
                f"{note.get('total_items', note.get('total_chars'))} returned). Ask for the rest with narrower "
                "arguments (a filter, a smaller limit, or an offset/page where the skill offers one)."
            ),
        }
    )
    return Shaped(content=cut, size=_size(cut), truncated=True, truncation=note, raw_size=raw_size, redacted=changed)
