"""A tool result as a model reads it: the fence airlock_sdk.fencing puts around content with provenance,
taken apart the only way a model should, at the opening marker and at the one closing marker with its id."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

OPENING = re.compile(r'<tool_result id="(?P<id>[0-9a-f]{16})"(?P<attributes>[^>]*)>\n')
ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Fenced:
    fence_id: str
    attributes: dict[str, str]
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def fenced(text: str) -> Fenced:
    """The fenced content of a model-facing text; fails unless there is exactly one opening marker and the
    text ends at the first and only closing marker carrying its id."""
    openings = list(OPENING.finditer(text))
    assert len(openings) == 1, f"expected one opening marker, found {len(openings)} in {text!r}"
    [opening] = openings
    closing = f'\n</tool_result id="{opening["id"]}">'
    assert text.count(closing) == 1 and text.endswith(closing), f"the fence closes early or never in {text!r}"
    assert f"between the markers with id {opening['id']}" in text[: opening.start()]  # the notice comes first
    return Fenced(
        fence_id=opening["id"],
        attributes=dict(ATTRIBUTE.findall(opening["attributes"])),
        body=text[opening.end() : -len(closing)],
    )
