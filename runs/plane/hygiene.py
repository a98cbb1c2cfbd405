"""Result hygiene: text a tool returns is data, never markup or code that runs where it is shown.

Active content (script/style/iframe/object/embed elements, `on*=` event handlers, `javascript:`
and `data:text/html` URLs) is removed from every string in a result, and the result is marked
with its provenance so that approvers, timelines and agents treat it as untrusted input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_ACTIVE_ELEMENTS = re.compile(
    r"<\s*(script|style|iframe|object|embed|svg|math|template)\b.*?(<\s*/\s*\1\s*>|$)", re.IGNORECASE | re.DOTALL
)
_LONE_TAGS = re.compile(
    r"<\s*/?\s*(script|style|iframe|object|embed|svg|math|template|link|meta|base|form)\b[^>]*>", re.IGNORECASE
)
_HANDLERS = re.compile(r"""\s+on[a-z]+\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)""", re.IGNORECASE)
_URL_SCHEME = re.compile(r"""(javascript|vbscript)\s*:|data\s*:\s*text/html""", re.IGNORECASE)
_CHECK = re.compile(r"<|javascript|vbscript|data\s*:", re.IGNORECASE)


@dataclass
class Cleaned:
    content: Any
    removed: int = 0


def clean_text(text: str) -> tuple[str, int]:
    """The text with active content removed, and how many pieces were removed."""
    if not _CHECK.search(text):
        return text, 0
    removed = 0
    for pattern, replacement in ((_ACTIVE_ELEMENTS, ""), (_LONE_TAGS, ""), (_HANDLERS, ""), (_URL_SCHEME, "unsafe:")):
        text, count = pattern.subn(replacement, text)
        removed += count
    return text, removed


def clean(content: Any) -> Cleaned:
    """Clean every string in a JSON value (keys included), keeping its shape."""
    if isinstance(content, str):
        text, removed = clean_text(content)
        return Cleaned(text, removed)
    if isinstance(content, list):
        items = [clean(item) for item in content]
        return Cleaned([item.content for item in items], sum(item.removed for item in items))
    if isinstance(content, dict):
        out, removed = {}, 0
        for key, value in content.items():
            clean_key, key_removed = clean_text(key) if isinstance(key, str) else (key, 0)
            cleaned = clean(value)
            out[clean_key] = cleaned.content
            removed += key_removed + cleaned.removed
        return Cleaned(out, removed)
    return Cleaned(content)


def provenance(*, skill: str, version: str, adapter: str, untrusted: bool, removed: int) -> dict:
    scheme = adapter.split(":", 1)[0]
    return {
        "source": f"{skill}@{version}" if version else skill,
        "adapter": scheme,
        "untrusted": untrusted,
        "active_content_removed": removed,
    }
