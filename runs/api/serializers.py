"""Request bodies of the agent-facing runs API (validation of the envelope; calls are checked by the gate)."""

from drf_spectacular.utils import extend_schema_field
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


@extend_schema_field(ProposedCallSerializer)
class ProposedCallField(serializers.Field):
    """One element of a batch, passed on as parsed. Documented as a proposed call, but any JSON value is
    accepted here: the gate checks each element itself (runs/batch_input.py), so one malformed element
    gets its own `validation` result instead of a 400 for the whole batch."""

    def __init__(self, **kwargs) -> None:
        super().__init__(allow_null=True, **kwargs)

    def to_internal_value(self, data: object) -> object:
        return data

    def to_representation(self, value: object) -> object:
        return value


class CallBatchSerializer(serializers.Serializer):
    calls = serializers.ListField(
        child=ProposedCallField(), min_length=1, max_length=50,
        help_text="1 to 50 proposed calls, answered one result each, in order. Each call is judged alone: an element "
                  "that is not a well-formed call (not an object, a NUL character or lone surrogate in a string or "
                  "key, an integer beyond ±(2**53 - 1), nesting deeper than 64 levels) gets a `validation` result "
                  "with the code `malformed_call`, is not recorded, and the other calls go on as usual.")


class RunFinishSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["completed", "failed", "cancelled"])
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)
