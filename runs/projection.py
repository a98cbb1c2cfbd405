"""Views of a result: the named field sets a skill declares in `output_views`, so that the model gets the
fields its task needs and is told how to get the rest.

A view is "*" (everything) or a list of field paths: `subject`, `sender.name`, and `messages[].id` for a
field of each item of a list (`[].id` when the result itself is a list). A projection keeps the paths it
names and never adds anything: it runs on the result that already passed the output schema, before it is
redacted and cut, so no view can show what redaction hides.
"""

from __future__ import annotations

from typing import Any

from registry.definitions import VIEW_ARGUMENT
from runs.errors import ValidationFailed

ALL = "*"
EACH = "[]"


def declared(manifest: dict) -> dict:
    """{view name: "*" or [paths]} as the manifest declares them; {} when it declares none."""
    views = (manifest.get("output_views") or {}).get("views")
    return views if isinstance(views, dict) else {}


def default_view(manifest: dict) -> str:
    views = declared(manifest)
    if not views:
        return ""
    default = (manifest.get("output_views") or {}).get("default")
    return default if default in views else min(views)


def chosen(manifest: dict, asked: str | None) -> str:
    """The view a call gets: the one it asked for, or the skill's default. An unknown name is refused
    with the names the model may use."""
    views = declared(manifest)
    if asked is None or asked == "":
        return default_view(manifest)
    if asked in views:
        return asked
    offered = sorted(views)
    raise ValidationFailed(
        f"{manifest.get('name', 'This skill')} has no view {asked!r}"
        + (f"; ask for one of: {', '.join(offered)}." if offered else "; it declares no views (leave view out)."),
        code="unknown_view",
        views=offered,
        fields=[{"field": "view", "message": f"one of {offered}" if offered else "not offered by this skill"}],
    )


def _tree(paths: list[str]) -> dict:
    """`["messages[].id", "messages[].subject", "total"]` -> {"messages": {"[]": {"id": {}, "subject": {}}},
    "total": {}}; an empty node keeps the whole value."""
    root: dict = {}
    for path in paths:
        node = root
        for part in path.split("."):
            names = [part[:-2], EACH] if part.endswith(EACH) and part != EACH else [part]
            for name in filter(None, names):
                node = node.setdefault(name, {})
    return root


def _apply(tree: dict, value: Any) -> Any:
    if not tree:
        return value
    if isinstance(value, list):  # `messages[].id`, and `messages.id` read the same way
        each = tree.get(EACH, tree)
        return [_apply(each, item) for item in value]
    if isinstance(value, dict):
        return {key: _apply(sub, value[key]) for key, sub in tree.items() if key != EACH and key in value}
    return value


def project(content: Any, manifest: dict, view: str) -> Any:
    """The content as the view shows it (all of it for "*" or when the skill declares no views)."""
    fields = declared(manifest).get(view, ALL)
    if fields == ALL or not isinstance(fields, list):
        return content
    return _apply(_tree(fields), content)


def envelope(manifest: dict, view: str) -> dict:
    """What the result tells the model about views: which one it got, and how to ask for the others."""
    views = declared(manifest)
    if not views:
        return {}
    others = sorted(name for name in views if name != view)
    shown = {"view": view, "other_views": others}
    if others:
        shown["views_note"] = (
            f"This is the '{view}' view; call again with {VIEW_ARGUMENT} (or the call's view) set to one of "
            f"{others} for other fields."
        )
    return shown
