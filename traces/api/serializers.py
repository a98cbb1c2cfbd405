"""Shapes of the span batch endpoint, for the schema only: ingest is a hot path, so traces.ingest.decode_batch
validates the body itself (the same fields, refused whole) and the view answers with a plain dict."""

from __future__ import annotations

from rest_framework import serializers


class SpanSerializer(serializers.Serializer):
    trace_id = serializers.CharField(required=False, help_text="32 hex digits; or give run_id instead.")
    run_id = serializers.UUIDField(required=False, help_text="The run whose trace the span belongs to.")
    span_id = serializers.CharField(required=False, help_text="16 hex digits; derived from the span when left out.")
    parent_span_id = serializers.CharField(required=False, allow_blank=True)
    kind = serializers.CharField(required=False, help_text="model, tool, agent, ... (other when left out).")
    name = serializers.CharField()
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(required=False, allow_null=True)
    skill_name = serializers.CharField(required=False, allow_blank=True)
    skill_version = serializers.CharField(required=False, allow_blank=True)
    call_id = serializers.CharField(required=False, allow_blank=True)
    outcome = serializers.CharField(required=False, allow_blank=True)
    error_class = serializers.CharField(required=False, allow_blank=True)
    end_user = serializers.CharField(required=False, allow_blank=True)
    attributes = serializers.DictField(required=False, help_text="The agent's own attributes (redacted on ingest).")


class SpanBatchSerializer(serializers.Serializer):
    spans = SpanSerializer(many=True)


class IngestResultSerializer(serializers.Serializer):
    received = serializers.IntegerField()
    stored = serializers.IntegerField()
    duplicates = serializers.IntegerField(help_text="Spans already stored (same trace and span id), skipped.")
    traces = serializers.ListField(child=serializers.CharField(), help_text="The trace ids the spans went to.")
