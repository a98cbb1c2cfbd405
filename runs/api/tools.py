"""GET /api/v1/tools: the exact model-facing tool definitions for this agent, for OpenAI, Anthropic or MCP.

With `run_id` the list comes from the run's pinned snapshot (runs/tool_list.py), so it stays the same
for the run's whole conversation; without it, from the latest snapshot. `disclosure=progressive` offers
only `find_tools` and `describe_tool` (runs/meta_tools.py), for a model that searches instead.
"""

from __future__ import annotations

import uuid

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.api_auth import IsAgent
from console.api_errors import error_body, error_responses
from registry.api.serializers import ToolDefinitionsSerializer
from registry.definitions import FORMATS, definitions_for
from registry.discovery import discoverable_entries
from registry.snapshots import index_for, latest_index
from runs import builtin_tools, tool_list
from runs.models import Run

DISCLOSURES = ("full", "progressive", "both")


class JsonOnlyNegotiation(DefaultContentNegotiation):
    """`?format=` names the tool format here, not a DRF renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def _refused(code: str, message: str, status: int = 400) -> Response:
    return Response(error_body("validation" if status == 400 else "not_found", code, message), status=status)


class ToolDefinitions(APIView):
    permission_classes = [IsAgent]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = JsonOnlyNegotiation

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=list(FORMATS)),
            OpenApiParameter(
                "run_id",
                str,
                description="A run of this agent: the list comes from the snapshot the run pinned, and stays the "
                "same for the whole run (less skills retired or ungranted since).",
            ),
            OpenApiParameter(
                "disclosure",
                str,
                enum=list(DISCLOSURES),
                description="full: every tool the agent may call (the default). progressive: only find_tools and "
                "describe_tool. both: all of them.",
            ),
        ],
        responses={200: ToolDefinitionsSerializer, **error_responses(400, 404)},
        tags=["registry (agents)"],
    )
    def get(self, request: Request) -> Response:
        """The exact model-facing tool definitions for this agent, for OpenAI, Anthropic or MCP."""
        fmt = request.query_params.get("format", "openai")
        if fmt not in FORMATS:
            return _refused("invalid_format", f"format must be one of {', '.join(FORMATS)}.")
        disclosure = request.query_params.get("disclosure", "full")
        if disclosure not in DISCLOSURES:
            return _refused("invalid_disclosure", f"disclosure must be one of {', '.join(DISCLOSURES)}.")
        run_id = request.query_params.get("run_id")
        body = {"format": fmt, "disclosure": disclosure}
        if run_id is None:
            index = latest_index()
            entries = discoverable_entries(request.auth, index) if disclosure != "progressive" else []
        else:
            try:
                run_pk = uuid.UUID(run_id)
            except ValueError:
                return _refused("invalid_run_id", "run_id must be a run's id (a UUID).")
            run = (
                Run.objects.of_agent(request.auth)
                .filter(pk=run_pk)
                .select_related("snapshot", "agent__tenant", "tenant")
                .first()
            )
            if run is None:  # another agent's or tenant's run reads exactly like one that does not exist
                return _refused("unknown_run", "No run with this id for this agent.", status=404)
            index = index_for(run.snapshot)
            entries = tool_list.callable_entries(run, index=index) if disclosure != "progressive" else []
            body["run_id"] = str(run.pk)
        if disclosure != "full":
            entries = [*builtin_tools.ENTRIES, *entries]
        return Response({**body, "snapshot": index.number, "tools": definitions_for(entries, fmt)})


tool_definitions = ToolDefinitions.as_view()
