"""Pinned MCP tool definitions: an imported tool is called only while its server serves the definition its team
reviewed ("rug pull": a server that changes a tool's description or schema after review).

A definition is the tool's name, title, description, input and output schemas and annotations, compared by
the SHA-256 of its canonical JSON (RFC 8785). The pin starts as the definition the tool was imported with
(`SkillVersion.imported_from["definition"]`, which its owners reviewed before publishing), or, for a tool
imported before pins existed, the first definition served. Before every call the execution plane lists the
server's tools on the same connection and compares: another definition is kept as pending, with what the scan
of its texts found (`lib.tool_descriptions`), and the call is refused (`tool_definition_changed`) until a
member of the server's team approves the change on the MCP servers page (`reliability.services`).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from lib.canonical import sha256_of
from lib.tool_descriptions import definition_of, findings
from registry.models import SkillVersion
from runs.errors import NotPermitted
from runs.plane.models import McpServer, McpToolPin


def hash_of(definition: dict) -> str:
    return sha256_of(definition)


def _imported(server: str, tool: str) -> dict | None:
    """The definition the tool was imported with, as its newest imported version recorded it."""
    recorded = (
        SkillVersion.objects.filter(manifest__execution__adapter=f"mcp://{server}/{tool}")
        .exclude(imported_from={})
        .order_by("-created_at")
        .values_list("imported_from", flat=True)
        .first()
    )
    return (recorded or {}).get("definition")


def expected(server: McpServer, tool: str) -> str | None:
    """The hash a served definition must have; None when nothing is pinned yet (the first one served is).
    Asked when the call is prepared, in the caller's thread."""
    pin = McpToolPin.objects.filter(server=server, tool=tool).values_list("sha256", flat=True).first()
    if pin is not None:
        return pin
    imported = _imported(server.name, tool)
    if imported is None:
        return None
    pinned, _ = McpToolPin.objects.get_or_create(
        server=server,
        tool=tool,
        defaults={"definition": imported, "sha256": hash_of(imported), "pinned_by_label": "imported"},
    )
    return pinned.sha256


def changed(server_name: str, tool: str) -> NotPermitted:
    return NotPermitted(
        f"The MCP server {server_name} changed the definition of its tool {tool} since it was reviewed; it is not "
        "called until a member of the server's team reviews the change.",
        code="tool_definition_changed",
    )


def record(server: McpServer, tool: str, definition: dict | None) -> None:
    """What the server served for the tool, kept after the call (in the caller's thread): the pin when nothing
    was pinned yet, or a pending change for review when it differs from the pin."""
    if definition is None:
        return  # the server no longer lists it: the call itself answered that it is gone
    sha = hash_of(definition)
    with transaction.atomic():
        pin, created = McpToolPin.objects.select_for_update().get_or_create(
            server=server, tool=tool, defaults={"definition": definition, "sha256": sha, "pinned_by_label": "first use"}
        )
        if created or pin.sha256 == sha or pin.pending_sha256 == sha:
            return
        pin.pending_definition, pin.pending_sha256, pin.pending_since = definition, sha, timezone.now()
        pin.pending_findings = findings(definition)
        pin.save(update_fields=["pending_definition", "pending_sha256", "pending_since", "pending_findings"])


__all__ = ["changed", "definition_of", "expected", "hash_of", "record"]
