"""What `tools/list` shows an agent: the tools of its session's run, as /api/v1/tools?format=mcp&run_id=…
lists them (the run's pinned snapshot, so the list holds for the whole session; a sessionless list, the
newest snapshot's), Airlock's `find_tools` and `describe_tool`, and the gateway's own `check_approval` tool."""

from __future__ import annotations

from uuid import UUID

import mcp_types as types

from console.models import Agent
from registry.definitions import mcp_definition
from runs import builtin_tools, client_exec, tool_list
from runs.models import Run

CHECK_APPROVAL = "check_approval"  # skill names always have a namespace ("billing.refund"), so never this

CHECK_APPROVAL_TOOL = types.Tool(
    name=CHECK_APPROVAL,
    title="Check approval",
    description="The outcome of a call that waited for a person's approval: the executed result once an "
    "approver decided, the decline reason if they declined, or 'approval pending' while nobody has yet. "
    "Pass the approval_id of an 'approval pending' answer.",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["approval_id"],
        "properties": {"approval_id": {"type": "integer", "minimum": 1}},
    },
    annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)


def _tool(definition: dict) -> types.Tool:
    """An MCP Tool without `outputSchema`: a call through Airlock may answer 'approval pending' instead of
    the skill's output, and MCP clients refuse a non-error result that does not match a declared schema."""
    hints = definition["annotations"]
    return types.Tool(
        name=definition["name"],
        title=definition["title"],
        description=definition["description"],
        input_schema=definition["inputSchema"],
        annotations=types.ToolAnnotations(
            read_only_hint=hints["readOnlyHint"],
            destructive_hint=hints["destructiveHint"],
            idempotent_hint=hints["idempotentHint"],
            open_world_hint=hints["openWorldHint"],
        ),
    )


def mcp_entries(agent: Agent, run_id: UUID | None) -> list[dict]:
    """What the session's run may call, less the skills its own process must run (client-executed skills),
    which an MCP client cannot; find_tools and describe_tool first. Without a run (a sessionless list):
    what a run started now may call, as each sessionless call starts one."""
    if run_id is None:
        skills = tool_list.callable_entries_now(agent)
    else:
        run = Run.objects.of_agent(agent).filter(pk=run_id).select_related("snapshot", "agent__tenant")
        found = run.first()
        skills = tool_list.callable_entries(found) if found is not None else []
    return [*builtin_tools.ENTRIES, *(entry for entry in skills if not client_exec.is_client_skill(entry["manifest"]))]


def tools_for(agent: Agent, run_id: UUID | None) -> list[types.Tool]:
    return [*(_tool(mcp_definition(entry)) for entry in mcp_entries(agent, run_id)), CHECK_APPROVAL_TOOL]


def effects_for(agent: Agent, run_id: UUID) -> dict[str, str]:
    """Skill name -> effect class, to tell reads (which may overlap) from everything else (one at a time)."""
    return {
        entry["name"]: (entry["manifest"].get("risk") or {}).get("effect", "") for entry in mcp_entries(agent, run_id)
    }
