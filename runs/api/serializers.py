"""Request bodies of the agent-facing runs API (validation of the envelope; calls are checked by the gate)."""

from rest_framework import serializers


class RunCreateSerializer(serializers.Serializer):
    end_user = serializers.CharField(max_length=200)
    end_user_roles = serializers.ListField(child=serializers.CharField(max_length=64), required=False, default=list)
    task = serializers.CharField(required=False, allow_blank=True, default="", max_length=4000)
    callback_url = serializers.URLField(required=False, allow_blank=True, default="", max_length=500)


class ProposedCallSerializer(serializers.Serializer):
    """Documentation of one proposed call; the gate validates each call itself so one bad call fails alone."""

    call_id = serializers.CharField()
    name = serializers.CharField()
    version = serializers.CharField(required=False)
    arguments = serializers.DictField(required=False)
    idempotency_key = serializers.CharField(required=False)
    taint = serializers.JSONField(required=False, help_text="true, or a string saying what untrusted content was read")


class CallBatchSerializer(serializers.Serializer):
    calls = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=50)


class RunFinishSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["completed", "failed", "cancelled"])
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)
