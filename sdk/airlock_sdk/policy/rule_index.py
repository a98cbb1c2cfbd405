"""Which rules of a policy a call can match, read off the conditions' source, without running CEL.

A condition `a && b && c` is false as soon as one conjunct is false, whatever the others give: the
CEL binding's `&&` is commutative, errors included (`error && false` is false; tests/policies/
test_rule_index.py checks it). So a rule can be left out of a decision when one of its top-level
conjuncts is a *guard* whose value is computed exactly from the Python context and is false:

    PATH == "text"   "text" == PATH   PATH != "text"   when PATH holds a str
    PATH.startsWith("text")   .endsWith   .contains    when PATH holds a str
    "text" in PATH                                     when PATH holds a list of str
    has(PATH.field)                                    when PATH holds a dict
    PATH   !PATH                                       when PATH holds a bool

Anything else (a missing field, another type, an expression that is not a guard, a condition with a
top-level `||` or `?:`) proves nothing, and the rule is evaluated by CEL as before: left-out rules are
exactly those CEL would have answered `false` without an error, so the decision is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ROOTS = frozenset(("skill", "args", "agent", "end_user", "tenant", "run"))

_SPACE = "[ \t\n\r\f]*"
_IDENT = "[A-Za-z_][A-Za-z0-9_]*"
_PATH = rf"({_IDENT}(?:\.{_IDENT})+)"
_TEXT = r"""(?:"([^"\\\n\r]*)"|'([^'\\\n\r]*)')"""
_GUARD_PATTERNS = (
    ("eq", re.compile(rf"{_PATH}{_SPACE}=={_SPACE}{_TEXT}"), 1, 2),
    ("eq", re.compile(rf"{_TEXT}{_SPACE}=={_SPACE}{_PATH}"), 3, 1),
    ("ne", re.compile(rf"{_PATH}{_SPACE}!={_SPACE}{_TEXT}"), 1, 2),
    ("ne", re.compile(rf"{_TEXT}{_SPACE}!={_SPACE}{_PATH}"), 3, 1),
    ("in", re.compile(rf"{_TEXT}[ \t\n\r\f]+in[ \t\n\r\f]+{_PATH}"), 3, 1),
    ("startsWith", re.compile(rf"{_PATH}\.startsWith\({_SPACE}{_TEXT}{_SPACE}\)"), 1, 2),
    ("endsWith", re.compile(rf"{_PATH}\.endsWith\({_SPACE}{_TEXT}{_SPACE}\)"), 1, 2),
    ("contains", re.compile(rf"{_PATH}\.contains\({_SPACE}{_TEXT}{_SPACE}\)"), 1, 2),
    ("has", re.compile(rf"has\({_SPACE}{_PATH}{_SPACE}\)"), 1, None),
    ("true", re.compile(_PATH), 1, None),
    ("false", re.compile(rf"!{_SPACE}{_PATH}"), 1, None),
)


@dataclass(frozen=True)
class Guard:
    kind: str  # a key of REFUTES_TEXT, or "in", "has", "true", "false"
    path: tuple[str, ...]  # for `has`, the map holding the field
    text: str = ""  # the literal, or the field `has` looks for


# When a guard on a str value is false; the other kinds are answered by PathGuards.ruled_out.
REFUTES_TEXT: dict[str, Callable[[str, str], bool]] = {
    "eq": lambda value, text: value != text,
    "ne": lambda value, text: value == text,
    "startsWith": lambda value, text: not value.startswith(text),
    "endsWith": lambda value, text: not value.endswith(text),
    "contains": lambda value, text: text not in value,
}


def guards_of(condition: str) -> tuple[Guard, ...]:
    """The guards among the condition's top-level conjuncts (none when it cannot be read safely)."""
    conjuncts = _conjuncts(condition)
    return tuple(guard for part in conjuncts or () if (guard := _guard(part)) is not None)


def _conjuncts(text: str) -> list[str] | None:
    """`text` split on its top-level `&&`, parenthesised conjunctions flattened; None when the
    top level has `||` or `?:`, or the text uses something this scanner does not read (comments,
    raw, byte or triple-quoted strings)."""
    parts, depth, start, index, size = [], 0, 0, 0, len(text)
    while index < size:
        char = text[index]
        if char in "\"'":
            index = _after_string(text, index)
            if index < 0:
                return None
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif text.startswith("//", index):
            return None
        elif depth == 0 and text.startswith("&&", index):
            parts.append(text[start:index])
            index += 2
            start = index
            continue
        elif depth == 0 and (text.startswith("||", index) or char == "?"):
            return None
        index += 1
    parts.append(text[start:])
    flat: list[str] = []
    for part in parts:
        part = part.strip(" \t\n\r\f")
        if _wrapped(part):
            inner = _conjuncts(part[1:-1])
            if inner is not None:
                flat.extend(inner)
        else:
            flat.append(part)
    return flat


def _after_string(text: str, index: int) -> int:
    """The index after the string literal opening at `index`, or -1 for literals left unread."""
    quote = text[index]
    if text.startswith(quote * 3, index) or (index > 0 and text[index - 1] in "rRbB"):
        return -1
    index += 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
        elif text[index] == quote:
            return index + 1
        else:
            index += 1
    return -1


def _wrapped(part: str) -> bool:
    """True when the whole part is one parenthesised expression, `( ... )`."""
    if not part.startswith("(") or not part.endswith(")"):
        return False
    depth, index = 0, 0
    while index < len(part):
        char = part[index]
        if char in "\"'":
            index = _after_string(part, index)
            if index < 0:
                return False
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index == len(part) - 1
        index += 1
    return False


def _guard(part: str) -> Guard | None:
    for kind, pattern, path_group, text_group in _GUARD_PATTERNS:
        match = pattern.fullmatch(part)
        if match is None:
            continue
        path = tuple(match.group(path_group).split("."))
        if path[0] not in ROOTS:
            return None
        if kind == "has":
            return Guard(kind, path[:-1], path[-1])
        if text_group is None:
            return Guard(kind, path)
        text = match.group(text_group)
        return Guard(kind, path, text if text is not None else match.group(text_group + 1))
    return None


MEMO_SIZE = 4096  # values remembered per path; past it the memo starts over
MEMO_CHARACTERS = 256  # longer values (arguments are the agent's) are answered afresh, never kept
_STR = frozenset((str,))


class PathGuards:
    """Every guard of one policy that reads one path. Each kind of guard can only refute one type of
    value (text guards a str, `in` a list of str, `has` a dict, bare paths a bool; a value of any
    other type, None included, refutes nothing), so the guards are kept by that type. Answers for
    short str values and lists of str are remembered, being functions of the value alone."""

    def __init__(self, path: tuple[str, ...], guards: list[tuple[Guard, int]]) -> None:
        self.path = path
        self._text = tuple((REFUTES_TEXT[g.kind], g.text, rules) for g, rules in guards if g.kind in REFUTES_TEXT)
        self._members = tuple((g.text, rules) for g, rules in guards if g.kind == "in")
        self._keys = tuple((g.text, rules) for g, rules in guards if g.kind == "has")
        self.holders = 0  # every rule with a guard on this path
        for _, rules in guards:
            self.holders |= rules
        self._if_false = self._if_true = 0
        for guard, rules in guards:
            if guard.kind == "true":
                self._if_false |= rules
            elif guard.kind == "false":
                self._if_true |= rules
        self.known: dict[str | tuple[str, ...], int] = {}

    def ruled_out(self, value: Any) -> int:
        """The rules whose guard on this path is false (without an error) for `value`, as a bitmask."""
        kind = type(value)
        if kind is str:
            return self._remember(value, [rules for refutes, text, rules in self._text if refutes(value, text)])
        if kind is list and self._members and set(map(type, value)) <= _STR:
            members = tuple(value)
            known = self.known.get(members)
            if known is None:
                known = self._remember(members, [rules for text, rules in self._members if text not in members])
            return known
        if kind is dict:
            ruled = 0
            for field, rules in self._keys:
                if field not in value:
                    ruled |= rules
            return ruled
        if kind is bool:
            return self._if_true if value else self._if_false
        return 0

    def _remember(self, value: str | tuple[str, ...], ruled: list[int]) -> int:
        mask = 0
        for rules in ruled:
            mask |= rules
        size = len(value) if type(value) is str else sum(map(len, value)) + len(value)
        if size <= MEMO_CHARACTERS:
            if len(self.known) >= MEMO_SIZE:
                self.known.clear()
            self.known[value] = mask
        return mask


class RuleIndex:
    """A policy's rules by the guards they hold, grouped by the path each guard reads."""

    def __init__(self, rule_guards: list[tuple[Guard, ...]]) -> None:
        self._every = (1 << len(rule_guards)) - 1
        holders: dict[Guard, int] = {}
        for position, guards in enumerate(rule_guards):
            for guard in guards:
                holders[guard] = holders.get(guard, 0) | (1 << position)
        by_path: dict[tuple[str, ...], list[tuple[Guard, int]]] = {}
        for guard, rules in holders.items():
            by_path.setdefault(guard.path, []).append((guard, rules))
        # Paths guarding most rules first: once they ruled those out, paths guarding only them are skipped.
        paths = sorted((PathGuards(path, guards) for path, guards in by_path.items()), key=_guarded, reverse=True)
        self.paths = tuple(paths)
        self._paths = tuple((p.path[0], p.path[1:], p.holders, p.known, p.ruled_out) for p in paths)

    def candidates(self, context: dict) -> list[int]:
        """Positions, in order, of the rules no guard proves false in `context`."""
        alive = self._every
        for root, fields, holders, known, ruled_out in self._paths:
            if not alive & holders:
                continue
            value = context.get(root)
            for name in fields:
                value = value.get(name) if type(value) is dict else None
            if value is not None:
                ruled = known.get(value) if type(value) is str else None
                alive &= ~(ruled_out(value) if ruled is None else ruled)
        positions: list[int] = []
        while alive:
            lowest = alive & -alive
            positions.append(lowest.bit_length() - 1)
            alive ^= lowest
        return positions


def _guarded(path_guards: PathGuards) -> int:
    return path_guards.holders.bit_count()
