"""What the model is given of a result: the view it asked for (runs.projection), redacted and kept within
its limit (runs.shaping), with a `next` handle when there is more (runs.pagination).

A call asks for a view or a page beside its arguments (`"view": "full"`, `"page": "<next>"`), or, as a
model does through a tool definition, inside them (`airlock_view`, `airlock_page`: registry.definitions
adds them to the definitions of the skills that declare views or pages). The gate calls `requested` once
per call and `present` once per result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from registry.definitions import PAGE_ARGUMENT, VIEW_ARGUMENT
from registry.snapshots import ResolvedSkill
from runs import pagination, projection
from runs.errors import ValidationFailed
from runs.models import ToolCall
from runs.shaping import Shaped, shape

MAX_VIEW_CHARS = 100


@dataclass(frozen=True)
class Presentation:
    """What a call asked to be given: a view, and maybe a page of an earlier result."""

    view: str
    page: pagination.PageRequest | None = None

    @property
    def from_store(self) -> bool:
        """Answered from a kept result: the tool does not run, whatever its effect."""
        return self.page is not None and self.page.source == pagination.STORED

    def recorded(self) -> dict:
        return {"view": self.view, **({"page": self.page.recorded()} if self.page else {})}


def requested(raw: dict, arguments: dict, *, skill: ResolvedSkill, run_id: str) -> tuple[Presentation, dict]:
    """The presentation a call asks for, and the arguments it runs with (a page's are the original call's)."""
    view = raw.get("view")
    page = raw.get("page")
    if VIEW_ARGUMENT in arguments or PAGE_ARGUMENT in arguments:
        view = arguments.get(VIEW_ARGUMENT, view)
        page = arguments.get(PAGE_ARGUMENT, page)
        arguments = {key: value for key, value in arguments.items() if key not in (VIEW_ARGUMENT, PAGE_ARGUMENT)}
    if view is not None and (not isinstance(view, str) or len(view) > MAX_VIEW_CHARS):
        raise ValidationFailed(
            "view must be the name of one of the skill's views.",
            code="malformed_call",
            fields=[{"field": "view", "message": "string"}],
        )
    opened = None
    if page is not None and page != "":
        opened = pagination.open_handle(page, run_id=run_id, skill_name=skill.name)
        arguments = pagination.arguments_for(opened, arguments, skill.manifest)
        view = view or opened.view or None
    return Presentation(view=projection.chosen(skill.manifest, view), page=opened), arguments


@dataclass
class Presented:
    shaped: Shaped
    envelope: dict  # view, other_views, next, paging: added to the result the model gets


def present(
    *, content: Any, skill: ResolvedSkill, call: ToolCall, arguments: dict | None, provenance: dict | None = None
) -> Presented:
    """Project, redact and cut one result; say which view it is and where the rest is.
    `content` is what the tool returned, or for a stored page the whole kept result."""
    manifest = skill.manifest
    asked = (call.decision or {}).get("presentation") or {}
    view = asked.get("view") or projection.default_view(manifest)
    page = asked.get("page") or {}
    offset = page.get("offset", 0) if page.get("source") == pagination.STORED else 0
    shown = pagination.rest_of(content, page.get("items_field", ""), offset) if offset else content
    shaped = shape(
        projection.project(shown, manifest, view),
        (manifest.get("execution") or {}).get("result_limit_bytes"),
        output_schema=manifest.get("output_schema"),
    )
    more = pagination.following(
        shaped=shaped,
        whole=content,
        asked=page,
        manifest=manifest,
        effect=skill.effect,
        run_id=str(call.run_id),
        call_id=call.call_id,
        arguments=arguments,
        view=view,
        provenance=provenance,
    )
    if more.get("next") and shaped.truncated:
        shaped.truncation["message"] = more["paging"]["message"]
    return Presented(shaped=shaped, envelope={**projection.envelope(manifest, view), **more})
