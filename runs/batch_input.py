"""What a single element of a batch must be before the gate looks at it.

Every string and key must be storable (PostgreSQL refuses NUL in text and in jsonb; a lone UTF-16
surrogate cannot be encoded as UTF-8), every number must hash the same way every time (the canonical
JSON of lib/canonical holds integers only within ±(2**53 - 1), and has no NaN or infinity), and the
nesting must stay shallow enough for every recursive encoder on the way to the database. An element
that breaks one of these rules gets a `validation` result of its own, and nothing of it is recorded.
"""

from __future__ import annotations

import math
import re

from runs.errors import ValidationFailed

MAX_DEPTH = 64  # the element itself is level 1, its `arguments` level 2
MAX_SAFE_INTEGER = 2**53 - 1  # RFC 8785 and I-JSON (RFC 7493): the integers every JSON reader holds exactly
# The tool names a batch may report as shown to the model (`exposed_tools`), and how long each may be.
MAX_EXPOSED_TOOLS, MAX_TOOL_NAME = 200, 200
_SURROGATE = re.compile("[\ud800-\udfff]")
_SHOWN_KEY, _SHOWN_PATH = 40, 200


def unstorable_text(text: str) -> str | None:
    """What makes the text unstorable (a NUL character, a lone surrogate), or None."""
    if "\x00" in text:
        return "a NUL character"
    if not text.isascii() and _SURROGATE.search(text):
        return "a lone UTF-16 surrogate (not valid Unicode)"
    return None


def _scalar_problem(value: object) -> str | None:
    """What makes a value other than an object or array unfit to store or hash, or None."""
    if isinstance(value, str):
        bad = unstorable_text(value)
        return f"contains {bad}" if bad else None
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return None
        return (
            f"is an integer beyond ±{MAX_SAFE_INTEGER} (2**53 - 1), which JSON numbers do not hold exactly; "
            "send it as a string"
        )
    if isinstance(value, float):
        return None if math.isfinite(value) else "is not a finite number (NaN and infinity are not JSON)"
    return f"is not a JSON value ({type(value).__name__})"


def _path(link: tuple | None) -> str:
    """`arguments.items[2].note` from a chain of (parent, key or index) links; built only for a message."""
    segments = []
    while link is not None:
        link, segment = link
        segments.append(segment)
    text = ""
    for segment in reversed(segments):
        if isinstance(segment, int):
            text += f"[{segment}]"
        else:
            shown = segment if len(segment) <= _SHOWN_KEY else segment[: _SHOWN_KEY - 1] + "…"
            text += f".{shown}" if text else shown
    return text


def _malformed(link: tuple | None, problem: str) -> ValidationFailed:
    path = _path(link)
    if not path:
        return ValidationFailed(f"The call {problem}.", code="malformed_call")
    where = path if len(path) <= _SHOWN_PATH else "…" + path[-(_SHOWN_PATH - 1) :]
    return ValidationFailed(f"{where} {problem}.", code="malformed_call", fields=[{"field": path, "message": problem}])


def check_call(raw: object) -> None:
    """Raise ValidationFailed when one element of a batch cannot be stored or judged safely.

    It runs on every call, so: an explicit stack of containers (a hostile nesting costs a bounded
    loop, not the interpreter's stack), scalars checked in place, and the path of the offending
    value (`arguments.items[2].note`) put together only when there is something to report.
    """
    if not isinstance(raw, dict):
        raise ValidationFailed("Each call must be an object with call_id, name and arguments.", code="malformed_call")
    stack: list[tuple[dict | list | tuple, tuple | None, int]] = [(raw, None, 1)]
    while stack:
        container, link, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _malformed(link, f"is nested deeper than {MAX_DEPTH} levels")
        is_object = isinstance(container, dict)
        for key, value in container.items() if is_object else enumerate(container):
            if is_object:
                if not isinstance(key, str):
                    raise _malformed(link, f"has a key that is not a string ({type(key).__name__})")
                if "\x00" in key or not key.isascii():  # plain ASCII keys, the usual case, end here
                    bad = unstorable_text(key)
                    if bad:
                        raise _malformed(link, f"has a key containing {bad}")
            kind = type(value)
            if kind is dict or kind is list or isinstance(value, dict | list | tuple):
                stack.append((value, (link, key), depth + 1))
            elif kind is str and "\x00" not in value and value.isascii():
                continue  # plain ASCII text, the usual case
            else:
                problem = _scalar_problem(value)
                if problem:
                    raise _malformed((link, key), problem)


def is_well_formed(raw: object) -> bool:
    """Whether `check_call` accepts the element, for code that must pass over malformed ones quietly."""
    try:
        check_call(raw)
    except ValidationFailed:
        return False
    return True
