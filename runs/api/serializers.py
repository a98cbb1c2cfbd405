"""Bodies of the agent-facing runs and pipelines API: requests validated here (a batch only as an envelope;
each call is checked by the gate), responses described here (see the note above CallResultSerializer)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from lib.sensitivity import looks_secret
from runs.batch_input import MAX_EXPOSED_TOOLS, MAX_TOOL_NAME, unstorable_text


class EndUserRoleField(serializers.CharField):
    """A role is a name policies compare against (`"vip" in end_user.roles`), stored with the run and its
    decisions: one that looks like a secret is refused rather than stored, or silently changed."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=64, **kwargs)

    def to_internal_value(self, data: object) -> str:
        role = super().to_internal_value(data)
        bad = unstorable_text(role)
        if bad:
            raise serializers.ValidationError(f"A role must not contain {bad}.")
        if looks_secret(role):
            raise serializers.ValidationError("A role must be a name, not a credential: this one looks like a secret.")
        return role


class RunCreateSerializer(serializers.Serializer):
    end_user = serializers.CharField(max_length=200)
    end_user_roles = serializers.ListField(child=EndUserRoleField(), required=False, default=list)
    task = serializers.CharField(required=False, allow_blank=True, default="", max_length=4000)
    callback_url = serializers.URLField(required=False, allow_blank=True, default="", max_length=500)
    model = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$",
        required=False,
        default="",
        max_length=100,
        help_text="The model the agent runs ('gpt-4o'): tool results' tokens are counted in its encoding.",
    )
    context_budget = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=100,
        max_value=10_000_000,
        help_text="Tokens of tool results the model is given before the oldest are replaced by a summary and "
        "a ref for describe_result. Default: the tenant's default_context_budget (none if unset).",
    )


@extend_schema_field({"oneOf": [{"type": "boolean"}, {"type": "string"}]})
class TaintField(serializers.JSONField):
    pass


class ProposedCallSerializer(serializers.Serializer):
    """Documentation of one proposed call; the gate validates each call itself so one bad call fails alone."""

    call_id = serializers.CharField()
    name = serializers.CharField()
    version = serializers.CharField(required=False)
    arguments = serializers.DictField(required=False)
    idempotency_key = serializers.CharField(required=False)
    taint = TaintField(required=False, help_text="true, or a string saying what untrusted content was read")
    view = serializers.CharField(required=False, help_text="One of the skill's output_views; its default otherwise.")
    page = serializers.CharField(
        required=False, help_text="The `next` handle of an earlier result of this skill in this run: its next page."
    )


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


class ToolNameField(serializers.CharField):
    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=MAX_TOOL_NAME, **kwargs)

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):  # CharField would turn a number into text
            self.fail("invalid")
        bad = unstorable_text(data)
        if bad:
            raise serializers.ValidationError(f"A tool name must not contain {bad}.")
        return super().to_internal_value(data)


MAX_BATCH_CALLS = 50


def plain_batch(data: object) -> dict | None:
    """What CallBatchSerializer would make of the usual body, a JSON object with 1 to MAX_BATCH_CALLS calls
    and no `exposed_tools`, without building its fields (which cost the gate more than the check); None
    for anything else, which the serializer then judges, errors included."""
    if type(data) is dict and "exposed_tools" not in data:
        calls = data.get("calls")
        if type(calls) is list and 1 <= len(calls) <= MAX_BATCH_CALLS:
            return {"calls": list(calls)}
    return None


class CallBatchSerializer(serializers.Serializer):
    exposed_tools = serializers.ListField(
        child=ToolNameField(),
        required=False,
        max_length=MAX_EXPOSED_TOOLS,
        help_text=f"The tool names the agent's framework showed the model this turn (at most {MAX_EXPOSED_TOOLS}, "
        f'each at most {MAX_TOOL_NAME} characters), recorded with every call of the batch for its "why" panel. '
        "Left out, each call records the skills the agent could call at the time, marked as not reported by the "
        "agent. A malformed list refuses the whole batch (400) and records nothing.",
    )
    calls = serializers.ListField(
        child=ProposedCallField(),
        min_length=1,
        max_length=MAX_BATCH_CALLS,
        help_text="1 to 50 proposed calls, answered one result each, in order. Each call is judged alone: an element "
        "that is not a well-formed call (not an object, a NUL character or lone surrogate in a string or "
        "key, an integer beyond ±(2**53 - 1), nesting deeper than 64 levels) gets a `validation` result "
        "with the code `malformed_call`, is not recorded, and the other calls go on as usual.",
    )


class RunFinishSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["completed", "failed", "cancelled"])
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)


class RunStopSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=300, help_text="Why: the agent's refusal and the run's timeline say it.")


class ClientErrorSerializer(serializers.Serializer):
    message = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class ClientResultSerializer(serializers.Serializer):
    """What an agent reports for a client-executed call: the `content` its function returned, or an `error`."""

    token = serializers.CharField(help_text="The token of the call's `execute_locally` result.")
    content = serializers.JSONField(required=False, allow_null=True, help_text="What the function returned.")
    error = ClientErrorSerializer(required=False, help_text="Instead of content: the function failed.")

    def validate(self, attrs: dict) -> dict:
        if "content" not in self.initial_data and "error" not in self.initial_data:
            raise serializers.ValidationError('Send {"token", "content"} or {"token", "error": {"message"}}.')
        return attrs


# --- responses: plain dicts shaped by the gate and the services, described here ---------------------------
# The gate's hot path never runs these serializers; they document the dicts it builds (runs/gate.py,
# runs/recording.py, runs/client_exec.py, runs/services.py), and tests/security/test_schema_fuzz.py checks
# the real responses against them.


class RunCreatedSerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    status = serializers.CharField()
    snapshot = serializers.IntegerField(help_text="The registry snapshot the run is pinned to.")
    trace_id = serializers.CharField(help_text="32 hex digits: the run's trace (OTLP).")
    webhook_secret = serializers.CharField(required=False, help_text="Only when a callback_url was given.")


class CallSummarySerializer(serializers.Serializer):
    call_id = serializers.CharField()
    name = serializers.CharField()
    status = serializers.CharField()
    verdict = serializers.CharField(allow_blank=True)
    error_class = serializers.CharField(allow_blank=True)


class RunStoppedSerializer(serializers.Serializer):
    """The `run_stopped` refusal a stopped run carries: who stopped it and why."""

    error_class = serializers.CharField(help_text="authorization")
    code = serializers.CharField(help_text="run_stopped")
    message = serializers.CharField()
    stopped_by = serializers.CharField(help_text="The username of the person who stopped the run.")
    reason = serializers.CharField(allow_blank=True)

    def get_fields(self) -> dict:
        fields = super().get_fields()
        fields["class"] = fields.pop("error_class")  # `class` is a Python keyword
        return fields


class RunSummarySerializer(serializers.Serializer):
    error = RunStoppedSerializer(required=False, help_text="Only on a stopped run.")
    run_id = serializers.UUIDField()
    status = serializers.CharField()
    status_reason = serializers.CharField(allow_blank=True)
    tainted = serializers.BooleanField()
    taint_source = serializers.CharField(allow_blank=True)
    snapshot = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    calls = CallSummarySerializer(many=True)


class CallErrorSerializer(serializers.Serializer):
    error_class = serializers.CharField(
        help_text="validation, authorization, approval_required, not_found, conflict, "
        "rate_limited, transient, timeout_unknown, unavailable, declined, "
        "expired or internal."
    )
    code = serializers.CharField()
    message = serializers.CharField()
    retry_after = serializers.IntegerField(required=False)
    fields = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        required=False,
        help_text="[{field, message}] of the arguments that were refused.",
    )
    schema_version = serializers.CharField(required=False)
    available = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="The versions that exist, when the one asked for does not.",
    )
    downstream_message = serializers.CharField(
        required=False,
        help_text="What the skill's service said when it refused the call (an HTTP 4xx body, an MCP tool error): "
        "active content removed, secrets masked, at most 1,000 characters.",
    )
    meaning = serializers.CharField(required=False, help_text="What the skill's manifest declares this error means.")

    def get_fields(self) -> dict:
        fields = super().get_fields()
        fields["class"] = fields.pop("error_class")  # `class` is a Python keyword
        return fields


class SkillRefSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()


class ProposedActionSerializer(serializers.Serializer):
    skill = serializers.CharField()
    version = serializers.CharField()
    effect = serializers.CharField()
    data_classification = serializers.CharField()
    arguments = serializers.JSONField(help_text="The call's arguments, as proposed.")


class TruncationSerializer(serializers.Serializer):
    cut = serializers.CharField(help_text="`items`, `items of '<key>'` or `text`.")
    returned_items = serializers.IntegerField(required=False)
    total_items = serializers.IntegerField(required=False)
    returned_chars = serializers.IntegerField(required=False)
    total_chars = serializers.IntegerField(required=False)
    items_field = serializers.CharField(required=False, help_text="The field whose list was cut.")
    limit_bytes = serializers.IntegerField()
    original_bytes = serializers.IntegerField()
    message = serializers.CharField()


class ProvenanceSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="name@version of the skill.")
    adapter = serializers.CharField()
    untrusted = serializers.BooleanField()
    active_content_removed = serializers.IntegerField()


class PagingSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="stored (the kept result) or tool (the tool's own cursor).")
    offset = serializers.IntegerField(help_text="Items of the whole result before this page.")
    returned_items = serializers.IntegerField(required=False)
    total_items = serializers.IntegerField(required=False)
    last_page = serializers.BooleanField()
    message = serializers.CharField(required=False, help_text="How to get the next page.")


class ReconciledSerializer(serializers.Serializer):
    resolution = serializers.CharField(help_text="succeeded or failed.")
    by = serializers.CharField(help_text="tool or owner.")
    note = serializers.CharField(allow_blank=True)


class CallResultSerializer(serializers.Serializer):
    """One call's outcome. `status` says which fields come with it: ok (content, skill, truncated, warnings),
    error (error), approval_required (approval_id, proposed_action, reason, expires_at) or execute_locally
    (token, expires_at, skill, arguments_sha256)."""

    call_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["ok", "error", "approval_required", "execute_locally"])
    is_error = serializers.BooleanField()
    content = serializers.JSONField(required=False, help_text="ok: what the tool returned, shaped to its limit.")
    skill = SkillRefSerializer(required=False)
    truncated = serializers.BooleanField(required=False)
    truncation = TruncationSerializer(required=False)
    warnings = serializers.ListField(child=serializers.CharField(), required=False)
    provenance = ProvenanceSerializer(required=False)
    view = serializers.CharField(required=False, help_text="ok: which of the skill's output_views this is.")
    other_views = serializers.ListField(child=serializers.CharField(), required=False)
    views_note = serializers.CharField(required=False)
    next = serializers.CharField(required=False, help_text="ok: send it as the call's `page` for the next page.")
    paging = PagingSerializer(required=False)
    error = CallErrorSerializer(required=False)
    approval_id = serializers.IntegerField(required=False)
    proposed_action = ProposedActionSerializer(required=False)
    reason = serializers.CharField(required=False, allow_blank=True)
    expires_at = serializers.DateTimeField(required=False)
    token = serializers.CharField(required=False, help_text="execute_locally: send it back with the result.")
    arguments_sha256 = serializers.CharField(required=False)
    arguments = serializers.JSONField(
        required=False, help_text="execute_locally: the arguments to run, when an approver edited them."
    )
    reconciled = ReconciledSerializer(required=False, help_text="The final outcome of a `timeout_unknown` call.")
    context_replaced = serializers.BooleanField(
        required=False,
        help_text="ok: the run's context budget replaced the content by {summary, ref}; describe_result(ref) "
        "returns it in full.",
    )


class ReplacedResultSerializer(serializers.Serializer):
    call_id = serializers.CharField()
    ref = serializers.CharField(help_text="Pass it to describe_result for the full result.")
    tokens = serializers.IntegerField(help_text="The result's tokens, as the model was given it.")
    summary = serializers.CharField(help_text="The line that takes the result's place in the model's context.")


class ContextNoteSerializer(serializers.Serializer):
    budget = serializers.IntegerField(help_text="The run's context budget, in tokens.")
    used_tokens = serializers.IntegerField(help_text="Tokens of the results still in the model's context.")
    replaced = ReplacedResultSerializer(
        many=True,
        help_text="Results this batch replaced, oldest first: replace earlier ones in the history you keep.",
    )


class BatchResultSerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    run_status = serializers.CharField()
    tainted = serializers.BooleanField()
    results = CallResultSerializer(many=True, help_text="One per proposed call, in the order given.")
    context = ContextNoteSerializer(required=False, help_text="Only for a run with a context budget.")


class RunFinishedSerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    status = serializers.CharField()
    status_reason = serializers.CharField(allow_blank=True)


# --- pipelines (sagas) and long-running jobs ------------------------------------------------------------------

STEP_ID = r"^[A-Za-z0-9_-]{1,100}$"


class CompensationSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The skill that undoes the step.")
    arguments = serializers.DictField(required=False, default=dict)


class ConditionSerializer(serializers.Serializer):
    """A step runs only when every condition on an earlier step's receipt holds."""

    step = serializers.CharField(help_text="The step_id of an earlier step.")
    path = serializers.CharField(required=False, help_text="Dotted path in its receipt; `status` when left out.")
    equals = serializers.JSONField(required=False, allow_null=True)
    not_equals = serializers.JSONField(required=False, allow_null=True)
    exists = serializers.BooleanField(required=False)


class PipelineStepSpecSerializer(serializers.Serializer):
    step_id = serializers.RegexField(STEP_ID, help_text="Unique in the pipeline: letters, digits, _ or -.")
    name = serializers.CharField(help_text="The skill to call.")
    arguments = serializers.DictField(
        required=False, default=dict, help_text="May quote earlier receipts as `${step_id.path}`."
    )
    when = ConditionSerializer(many=True, required=False, default=list)
    compensation = CompensationSerializer(required=False, allow_null=True, default=None)


class PipelineSubmitSerializer(serializers.Serializer):
    pipeline_id = serializers.RegexField(
        STEP_ID, help_text="The agent's id, unique in the run (a repeat returns the stored pipeline)."
    )
    steps = PipelineStepSpecSerializer(many=True, min_length=1, max_length=20)


class PipelineStepSerializer(serializers.Serializer):
    step_id = serializers.CharField()
    name = serializers.CharField()
    status = serializers.CharField()
    receipt = CallResultSerializer(allow_null=True, help_text="The gate's result for the step.")
    compensation = serializers.CharField(allow_null=True, help_text="The compensating skill's name.")
    compensation_receipt = CallResultSerializer(allow_null=True)


class PipelineStateSerializer(serializers.Serializer):
    pipeline_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["pending", "running", "waiting", "succeeded", "compensated", "failed"])
    error = serializers.CharField(allow_blank=True)
    steps = PipelineStepSerializer(many=True)


class JobCompleteSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["succeeded", "failed"])
    result = serializers.JSONField(required=False, allow_null=True, help_text="What the job produced.")
    error = serializers.CharField(required=False, allow_blank=True, allow_null=True, help_text="Why it failed.")


class JobCompletedSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    status = serializers.CharField()


class LocalCallSerializer(serializers.Serializer):
    """One call the SDK decided locally, as its spool holds it (airlock_sdk.spool.SpooledCall). Each call is
    checked on its own by runs.local_calls; a refused one does not stop the others."""

    call_id = serializers.CharField(max_length=200)
    run_id = serializers.UUIDField(required=False)
    skill = serializers.CharField(max_length=200)
    version = serializers.CharField(max_length=64, allow_blank=True, required=False)
    arguments = serializers.DictField()
    verdict = serializers.ChoiceField(choices=["allow"])
    reason = serializers.CharField(allow_blank=True, required=False)
    bundle_number = serializers.IntegerField(min_value=1)
    decided_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=["decided", "succeeded", "failed"])
    result = serializers.JSONField(required=False, allow_null=True)
    error = ClientErrorSerializer(required=False, allow_null=True)
    finished_at = serializers.DateTimeField(required=False, allow_null=True)
    sequence = serializers.IntegerField(min_value=0, required=False)


class LocalCallsUploadSerializer(serializers.Serializer):
    calls = LocalCallSerializer(many=True, help_text="At most 100 per upload (runs.local_calls.MAX_UPLOAD).")


class LocalCallAnswerSerializer(serializers.Serializer):
    call_id = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["recorded", "refused"])
    call_status = serializers.CharField(required=False, help_text="succeeded or failed, when recorded.")
    bundle_number = serializers.IntegerField(required=False)
    flagged = serializers.BooleanField(required=False, help_text="Today's policy would not allow it.")
    error = CallErrorSerializer(required=False, help_text="Why it was refused.")


class LocalCallsUploadedSerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    recorded = serializers.IntegerField()
    refused = serializers.IntegerField()
    results = LocalCallAnswerSerializer(many=True)


# Owners' tries of a skill version (runs/api/trials.py) ----------------------------------------------------


class TryCallSerializer(serializers.Serializer):
    arguments = serializers.JSONField(help_text="The call's arguments, checked against the input schema.")
    role = serializers.RegexField(
        r"^[a-z][a-z0-9_-]{0,63}$", required=False, default="", help_text="Agent role to evaluate the verdict for."
    )
    tenant = serializers.SlugField(
        required=False, default="", help_text="One of your tenants (default: your first); its grants and policies."
    )


class TryFieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField()
    message = serializers.CharField()


class TryValidationSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    fields = TryFieldErrorSerializer(many=True, required=False)


class TryDecisionSerializer(serializers.Serializer):
    verdict = serializers.CharField(help_text="allow, confirm or deny; empty when no role was chosen.")
    rule_id = serializers.CharField(required=False)
    scope = serializers.CharField(required=False)
    policy_version = serializers.CharField(required=False)
    reason = serializers.CharField()
    floor = serializers.CharField(required=False)
    floor_id = serializers.CharField(required=False)


class TryTargetSerializer(serializers.Serializer):
    adapter = serializers.CharField()
    reason = serializers.ChoiceField(choices=["sandbox", "read_without_sandbox"])


class TryShapingSerializer(serializers.Serializer):
    bytes_in = serializers.IntegerField()
    bytes_out = serializers.IntegerField()
    redacted = serializers.BooleanField()
    cut = serializers.CharField(required=False)
    limit_bytes = serializers.IntegerField(required=False)
    original_bytes = serializers.IntegerField(required=False)


class TryWhySerializer(serializers.Serializer):
    target = TryTargetSerializer()
    tenant = serializers.CharField(help_text="Whose grants and policies; empty: no tenant.")
    validation = TryValidationSerializer()
    decision = TryDecisionSerializer(required=False, help_text="Absent when the reader is not in the try's tenant.")
    contract_violation = serializers.CharField(required=False)
    shaping = TryShapingSerializer(required=False)


class TryAttemptSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    error_class = serializers.CharField()
    code = serializers.CharField()
    retry_in_s = serializers.FloatField(allow_null=True)


class TrySpanSerializer(serializers.Serializer):
    name = serializers.CharField()
    target = serializers.CharField()
    started_at = serializers.CharField()
    duration_ms = serializers.IntegerField()
    attempts = TryAttemptSerializer(many=True)


class SkillTrySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    skill = serializers.CharField()
    version = serializers.CharField()
    tried_by = serializers.CharField()
    tenant = serializers.CharField(allow_null=True, help_text="Whose verdict; null: no tenant.")
    agent_role = serializers.CharField()
    via = serializers.ChoiceField(choices=["console", "api"])
    target = serializers.CharField(help_text="The adapter called: the sandbox, or a read's own target.")
    outcome = serializers.ChoiceField(
        choices=["ok", "invalid", "error", "not_run"],
        help_text="not_run: the ruling did not let it run (a deny or refusal, a confirm without a sandbox, no role).",
    )
    verdict = serializers.CharField(help_text="allow, confirm or deny as the gate would decide; empty: no role.")
    result = serializers.JSONField(help_text="The shaped result, or {error} when the call failed.")
    why = TryWhySerializer()
    span = TrySpanSerializer(required=False, help_text="Empty when nothing was called (invalid arguments, not run).")
    created_at = serializers.DateTimeField()
