"""What a tool's own definition says to the model that it should not: the scan an imported or changed MCP tool
goes through before anyone reviews it ("tool poisoning": instructions hidden in a description).

Each finding is a short phrase a reviewer reads ("hides text in an HTML comment"). A finding does not block by
itself: it sends the tool to review, where a person decides. The checks follow the published attacks: text the
person does not see (invisible or bidirectional characters, HTML comments, tags such as <IMPORTANT>),
instructions aimed at the model (ignore previous instructions, do not tell the user), requests to read
secrets (keys, tokens, ~/.ssh, .env) and to call other tools.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

DEFINITION_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def definition_of(tool: dict) -> dict:
    """The parts of a listed MCP tool that tell a model what it does and how to call it: what is pinned."""
    return {key: tool[key] for key in DEFINITION_KEYS if tool.get(key) not in (None, "", {}, [])}


CHECKS: list[tuple[str, re.Pattern]] = [
    ("hides text in an HTML comment", re.compile(r"<!--.*?-->", re.S)),
    ("carries a tag aimed at the model", re.compile(r"</?\s*(important|system|instructions?|secret|hidden)\b", re.I)),
    (
        "tells the model to ignore its instructions",
        re.compile(
            r"\b(ignore|disregard|forget)\b.{0,40}\b(previous|prior|above|earlier|all|other)\b.{0,20}"
            r"\b(instructions?|rules|prompts?|messages?)\b",
            re.I | re.S,
        ),
    ),
    (
        "tells the model to keep something from the user",
        re.compile(r"\b(do not|don't|never)\b.{0,30}\b(tell|mention|inform|show|reveal)\b.{0,30}\buser\b", re.I | re.S),
    ),
    (
        "asks for secrets or credentials",
        re.compile(
            r"(~/\.ssh|id_rsa|\.env\b|api[_ -]?keys?|access[_ -]?tokens?|passwords?|credentials?|"
            r"private[_ -]?keys?|mcp\.json)",
            re.I,
        ),
    ),
    (
        "asks the model to call other tools",
        re.compile(
            r"\b(before|after|instead of)\b.{0,40}\b(using|calling)\b.{0,30}\b(this|any|other)\b.{0,10}\btools?\b|"
            r"\b(call|invoke|use)\b.{0,20}\b(the )?\w+ tool\b",
            re.I | re.S,
        ),
    ),
]


def _texts(value: Any) -> list[str]:
    """Every string a model may read in a definition: the description and each schema's descriptions."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


def _invisible(text: str) -> bool:
    return any(unicodedata.category(char) in ("Cf", "Co", "Cn") for char in text)


def findings(definition: dict) -> list[str]:
    """What the definition's texts say that a reviewer must see, in the order of CHECKS (empty when nothing)."""
    texts = _texts({key: definition.get(key) for key in ("description", "inputSchema", "outputSchema", "title")})
    found = ["hides invisible or direction-changing characters"] if any(_invisible(t) for t in texts) else []
    for label, pattern in CHECKS:
        if any(pattern.search(text) for text in texts):
            found.append(label)
    return found


__all__ = ["DEFINITION_KEYS", "definition_of", "findings"]
