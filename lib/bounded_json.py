"""JSON from outside, refused past a nesting depth, so that nothing downstream recurses past Python's limit.

A body nested a thousand deep makes `json.loads` (and every recursive walk after it: redaction, schema
validation, canonical JSON) raise RecursionError, a 500. The limit is protobuf's default recursion limit,
which already bounds OTLP's protobuf bodies the same way.
"""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_DEPTH = 100


class TooDeep(ValueError):
    """A JSON document nested past MAX_JSON_DEPTH: as malformed as any other ValueError json raises."""

    def __init__(self) -> None:
        super().__init__(f"the document is nested too deeply (past {MAX_JSON_DEPTH} levels)")


def check_depth(value: Any) -> Any:
    """`value` itself, or TooDeep when its lists and objects nest past MAX_JSON_DEPTH (walked without recursion)."""
    level: list[tuple[Any, int]] = [(value, 1)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_JSON_DEPTH:
                    raise TooDeep()
                level.append((child, depth + 1))
    return value


def loads(data: str | bytes) -> Any:
    """`json.loads`, raising TooDeep (a ValueError) for a document nested too deeply to parse or to walk."""
    try:
        return check_depth(json.loads(data))
    except RecursionError:
        raise TooDeep() from None
