"""Pages the model can follow: a `next` handle on a result that has more, and what a call bearing one gets.

Two sources of more:
- the shaper cut a list to fit `result_limit_bytes`: the whole result (redacted) is kept as a
  `StoredResult`, and the following pages are read from it, for any effect: the tool never runs again;
- a read skill's tool returned a cursor where its manifest's `pagination` says (`cursor_field`): the next
  page is the same call again with the cursor in `cursor_argument`. Only reads are re-called.

A handle is sealed (lib.sealing: encrypted and authenticated), so the model can neither read nor change
it, and it names the run, the skill, the view and the original arguments. The gate refuses it in another
run, for another skill, with other arguments, or altered. It holds as long as its run: a closed run
refuses every call, and retention deletes a run's stored results with the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lib.canonical import sha256_of
from lib.sealing import seal, unseal
from registry.definitions import PAGE_ARGUMENT
from runs.errors import NotFound, ValidationFailed
from runs.models import StoredResult, ToolCall
from runs.shaping import Shaped
from traces.redaction import redact

HANDLE_KIND = "airlock.page.v1"  # other sealed values (approved arguments, credentials) are never a page
STORED, TOOL = "stored", "tool"
MAX_HANDLE_CHARS = 16_000


@dataclass(frozen=True)
class PageRequest:
    """What an opened handle asks for."""

    source: str
    arguments: dict
    view: str
    stored_id: str = ""
    offset: int = 0
    items_field: str = ""
    cursor: Any = None

    def recorded(self) -> dict:
        """What the call keeps of it (ToolCall.decision): never the arguments or the tool's cursor."""
        page = {"source": self.source}
        if self.source == STORED:
            page.update({"stored_id": self.stored_id, "offset": self.offset, "items_field": self.items_field})
        return page


def _refused(message: str, code: str) -> ValidationFailed:
    return ValidationFailed(message, code=code, fields=[{"field": "page", "message": message}])


def open_handle(handle: object, *, run_id: str, skill_name: str) -> PageRequest:
    """The page a handle asks for, if it was issued in this run for this skill."""
    if not isinstance(handle, str) or not handle or len(handle) > MAX_HANDLE_CHARS:
        raise _refused("page must be the `next` handle of an earlier result, as given.", "invalid_page")
    try:
        payload = unseal(handle)
    except (ValueError, TypeError):
        payload = None
    if not isinstance(payload, dict) or payload.get("kind") != HANDLE_KIND:
        raise _refused(
            "This page handle is not one Airlock issued (or it was altered); use `next` as given.", "invalid_page"
        )
    if payload.get("run") != str(run_id):
        raise _refused(
            "This page handle belongs to another run; page handles work only in their own run.", "page_of_another_run"
        )
    if payload.get("skill") != skill_name:
        raise _refused(
            f"This page handle belongs to {payload.get('skill')}; call that skill with it.", "page_of_another_skill"
        )
    return PageRequest(
        source=payload["source"],
        arguments=payload["arguments"],
        view=payload.get("view", ""),
        stored_id=payload.get("stored_id", ""),
        offset=payload.get("offset", 0),
        items_field=payload.get("items_field", ""),
        cursor=payload.get("cursor"),
    )


def arguments_for(page: PageRequest, given: dict, manifest: dict) -> dict:
    """The arguments a page call runs with: the original ones (the call may repeat them, not change them),
    plus the tool's cursor for a tool page."""
    if given and sha256_of(given) != sha256_of(page.arguments):
        raise _refused(
            "A page continues the call that gave it: send it with the same arguments, or with none.",
            "page_arguments_differ",
        )
    if page.source == TOOL:
        return {**page.arguments, (manifest.get("pagination") or {})["cursor_argument"]: page.cursor}
    return dict(page.arguments)


def stored_content(page: PageRequest, *, run_id: str) -> tuple[Any, dict | None]:
    """The whole result a stored page is read from, and its provenance (so every page is fenced alike)."""
    kept = StoredResult.objects.filter(pk=page.stored_id, run_id=run_id).values_list("content", "provenance").first()
    if kept is None:
        raise NotFound("The result this page belongs to is no longer kept; call the skill again.", code="page_expired")
    return kept


def producing_call(page: PageRequest, *, run_id: str) -> ToolCall | None:
    """The call whose kept result a stored page is cut from (None once the result is no longer kept)."""
    kept = StoredResult.objects.filter(pk=page.stored_id, run_id=run_id).values("call_id")
    return ToolCall.objects.filter(run_id=run_id, call_id__in=kept).only("verdict", "decision").first()


def recorded_page(call: ToolCall) -> PageRequest | None:
    """The stored page a recorded call asked for (an approved page is served from the record, never re-run)."""
    page = ((call.decision or {}).get("presentation") or {}).get("page") or {}
    if page.get("source") != STORED:
        return None
    return PageRequest(
        source=STORED,
        arguments={},
        view="",
        stored_id=page.get("stored_id", ""),
        offset=page.get("offset", 0),
        items_field=page.get("items_field", ""),
    )


def rest_of(content: Any, items_field: str, offset: int) -> Any:
    """The result from item `offset` on of the list that was cut (the result itself, or its `items_field`)."""
    if not items_field:
        return content[offset:] if isinstance(content, list) else content
    if isinstance(content, dict) and isinstance(content.get(items_field), list):
        return {**content, items_field: content[items_field][offset:]}
    return content


def keep_full_result(
    *, run_id: str, call_id: str, skill_name: str, content: Any, provenance: dict | None = None
) -> str:
    """Store a whole (already redacted) result for its pages; its id goes into the handles."""
    kept = StoredResult.objects.create(
        run_id=run_id, call_id=call_id, skill_name=skill_name, content=content, provenance=provenance
    )
    return str(kept.pk)


def _handle(*, run_id: str, skill_name: str, arguments: dict, view: str, **where: Any) -> str:
    return seal(
        {"kind": HANDLE_KIND, "run": str(run_id), "skill": skill_name, "arguments": arguments, "view": view, **where}
    )


def _cursor_of(content: Any, manifest: dict, effect: str) -> Any:
    declared = manifest.get("pagination") or {}
    if effect != "read" or not declared.get("cursor_field") or not isinstance(content, dict):
        return None
    return content.get(declared["cursor_field"]) or None


def following(
    *,
    shaped: Shaped,
    whole: Any,
    asked: dict,
    manifest: dict,
    effect: str,
    run_id: str,
    call_id: str,
    arguments: dict | None,
    view: str,
    provenance: dict | None = None,
) -> dict:
    """`next` and a `paging` note for the result, when there is more to read; {} otherwise.

    `whole` is the content this answer was cut from (a stored page's whole stored result); `asked` the
    page the call asked for (ToolCall.decision["presentation"]["page"]), {} on a first call."""
    if arguments is None:  # a caller that cannot name the original arguments issues no handle
        return {}
    name = manifest.get("name", "")
    where = dict(run_id=run_id, skill_name=name, arguments=arguments, view=view)
    offset = asked.get("offset", 0) if asked.get("source") == STORED else 0
    note = shaped.truncation
    if shaped.truncated and note.get("returned_items"):  # none: one item alone is over the limit
        stored_id = asked.get("stored_id") if asked.get("source") == STORED else ""
        items_field = asked.get("items_field", "") if stored_id else note.get("items_field", "")
        if not stored_id:
            schema = manifest.get("output_schema")
            stored_id = keep_full_result(
                run_id=run_id,
                call_id=call_id,
                skill_name=name,
                content=redact(whole, schema=schema if isinstance(schema, dict) else None),
                provenance=provenance,
            )
        returned = note["returned_items"]
        total = offset + note["total_items"]
        handle = _handle(source=STORED, stored_id=stored_id, offset=offset + returned, items_field=items_field, **where)
        return _paging(handle, name, source=STORED, offset=offset, returned=returned, total=total)
    cursor = _cursor_of(whole, manifest, effect)
    if cursor is not None:
        original = {k: v for k, v in arguments.items() if k != manifest["pagination"].get("cursor_argument")}
        handle = _handle(source=TOOL, cursor=cursor, **{**where, "arguments": original})
        return _paging(handle, name, source=TOOL, offset=offset)
    if asked:
        return {"paging": {"source": asked.get("source"), "offset": offset, "last_page": True}}
    return {}


def _paging(
    handle: str, name: str, *, source: str, offset: int, returned: int | None = None, total: int | None = None
) -> dict:
    counted = f"items {offset + 1}–{offset + returned} of {total} returned. " if returned is not None else ""
    message = (
        f'More results follow: {counted}Call {name} again with "{PAGE_ARGUMENT}" set to the value of "next" '
        '(the same arguments, or none; the API also takes it as the call\'s "page") for the next page.'
    )
    paging = {"source": source, "offset": offset, "message": message, "last_page": False}
    if returned is not None:
        paging.update({"returned_items": returned, "total_items": total})
    return {"next": handle, "paging": paging}
