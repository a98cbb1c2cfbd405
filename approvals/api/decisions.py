"""`GET /api/v1/decisions`: the decision history of the tenants where the caller is an admin or an auditor,
with the console page's filters, as JSON pages or streamed as CSV or JSON Lines (`format=csv|jsonl`).

`format` is this endpoint's own parameter, not DRF's renderer override: errors are always JSON."""

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.decisions import EXPORTS, decision_row, decisions_in
from approvals.forms import DecisionFilterForm
from console.api_auth import IsHuman
from console.api_errors import error_body, error_responses
from console.tenancy import decision_reader_tenant_ids, decision_reader_tenant_or_404

FORMATS = ("json", *EXPORTS)


class JSONOnly(BaseContentNegotiation):
    """The JSON renderer whatever `format` says: this endpoint streams its exports itself."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class DecisionPages(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200


class DecisionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    tenant = serializers.CharField()
    outcome = serializers.ChoiceField(
        choices=["approved", "edit-approved", "vote", "declined", "expired", "cancelled"],
        help_text="`vote` is the first approval of a two-person request.",
    )
    decided_by = serializers.CharField(help_text="A username, or `system (expired)` and the like.")
    via = serializers.CharField(help_text="console, api or system.")
    reason = serializers.CharField(allow_blank=True)
    skill = serializers.CharField()
    skill_version = serializers.CharField(allow_blank=True)
    agent = serializers.CharField(allow_blank=True)
    approval_id = serializers.IntegerField(allow_null=True)
    run_id = serializers.UUIDField(allow_null=True)
    call_id = serializers.CharField(allow_blank=True)
    arguments = serializers.JSONField(
        allow_null=True, help_text="As the inbox shows a closed request; null for confidential and restricted skills."
    )
    changes = serializers.JSONField(allow_null=True, help_text="An edit's changes; paths only for confidential skills.")
    request_url = serializers.CharField(allow_null=True)
    trace_url = serializers.CharField(allow_null=True)


class DecisionPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = DecisionSerializer(many=True)


def _invalid(code: str, message: str) -> Response:
    return Response(error_body("validation", code, message), status=400)


class DecisionList(APIView):
    permission_classes = [IsHuman]
    content_negotiation_class = JSONOnly

    @extend_schema(
        operation_id="decisions_list",
        parameters=[
            OpenApiParameter("tenant", str, description="A tenant's slug; default every tenant you audit."),
            OpenApiParameter("skill", str, description="Part of the skill's name."),
            OpenApiParameter("approver", str, description="The username who decided."),
            OpenApiParameter("outcome", str, enum=["approved", "edited", "vote", "declined", "expired", "cancelled"]),
            OpenApiParameter("agent", str, description="The agent's name."),
            OpenApiParameter("date_from", OpenApiTypes.DATE, description="First day (UTC), included."),
            OpenApiParameter("date_to", OpenApiTypes.DATE, description="Last day (UTC), included."),
            OpenApiParameter("format", str, enum=list(FORMATS), description="json (pages), csv or jsonl (all)."),
        ],
        responses={
            200: OpenApiResponse(DecisionPageSerializer, description="JSON pages; csv and jsonl stream every row."),
            **error_responses(400, 403, 404),
        },
    )
    def get(self, request: Request) -> Response | StreamingHttpResponse:
        export_format = request.query_params.get("format", "json")
        if export_format not in FORMATS:
            return _invalid("invalid_format", "format must be json, csv or jsonl.")
        form = DecisionFilterForm(request.query_params)
        if not form.is_valid():
            return _invalid("invalid_filter", form.error_summary())
        if request.query_params.get("tenant"):
            tenant_ids = {decision_reader_tenant_or_404(request.user, request.query_params["tenant"]).pk}
        else:
            tenant_ids = decision_reader_tenant_ids(request.user)
        if not tenant_ids:
            message = "You need the admin or auditor role in a tenant to read its decision history."
            return Response(error_body("authorization", "not_allowed", message), status=403)
        events = decisions_in(tenant_ids, form.cleaned_data)
        if export_format in EXPORTS:
            lines, content_type = EXPORTS[export_format]
            return StreamingHttpResponse(lines(events), content_type=content_type)
        paginator = DecisionPages()
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response([decision_row(event) for event in page])
