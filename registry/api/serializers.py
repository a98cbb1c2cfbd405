"""Shapes of the registry API: the manifest body (validated), and the responses, which the views build as
plain dicts (version_data, skill_data, registry.discovery, registry.definitions) and these describe."""

from __future__ import annotations

from rest_framework import serializers

from console.api_errors import ProblemSerializer


class ManifestSerializer(serializers.Serializer):
    manifest = serializers.DictField(help_text="The skill manifest (see /api/v1/skills/manifest-schema).")


class DeprecateSerializer(serializers.Serializer):
    replacement = serializers.CharField(required=False, allow_blank=True, help_text="Name of the replacement skill.")
    sunset_at = serializers.DateTimeField(required=False, allow_null=True)


class RetireSerializer(serializers.Serializer):
    replacement = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Name of the skill that replaces it (kept from deprecation if empty).",
    )


# --- agents -----------------------------------------------------------------------------------


class AudienceSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    agent_id = serializers.IntegerField()
    agent_name = serializers.CharField()
    key_lookup = serializers.CharField()
    agent_role = serializers.CharField()


class SnapshotEntrySerializer(serializers.Serializer):
    skill_version_id = serializers.IntegerField()
    skill_pk = serializers.IntegerField()
    skill_id = serializers.CharField()
    name = serializers.CharField()
    namespace = serializers.CharField()
    owner_team = serializers.CharField()
    version = serializers.CharField()
    status = serializers.CharField()
    effect = serializers.CharField()
    data_classification = serializers.CharField()
    manifest = serializers.DictField(help_text="The version's manifest (see /api/v1/skills/manifest-schema).")
    replacement_name = serializers.CharField(allow_null=True)
    deprecated_at = serializers.DateTimeField(allow_null=True)
    sunset_at = serializers.DateTimeField(allow_null=True)


class SnapshotBodySerializer(serializers.Serializer):
    format = serializers.CharField()
    number = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    source_sha256 = serializers.CharField()
    audience = AudienceSerializer(help_text="Signed: a runtime refuses a snapshot fetched for another agent.")
    skills = SnapshotEntrySerializer(many=True)


class SignedSnapshotSerializer(serializers.Serializer):
    snapshot = SnapshotBodySerializer()
    sha256 = serializers.CharField()
    signature = serializers.CharField(help_text="Ed25519 over the RFC 8785 form of `snapshot`.")
    key_id = serializers.CharField()
    algorithm = serializers.ChoiceField(choices=["Ed25519"])
    canonicalization = serializers.ChoiceField(choices=["RFC 8785"])


class PublicKeySerializer(serializers.Serializer):
    algorithm = serializers.ChoiceField(choices=["Ed25519"])
    key_id = serializers.CharField()
    public_key_pem = serializers.CharField()


class SkillSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    namespace = serializers.CharField()
    version = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    effect = serializers.CharField()
    data_classification = serializers.CharField()
    approval = serializers.CharField(allow_null=True)
    untrusted_output = serializers.BooleanField()


class SearchResultSerializer(serializers.Serializer):
    query = serializers.CharField(allow_blank=True)
    snapshot = serializers.IntegerField()
    fallback = serializers.CharField(allow_null=True, help_text="How the ranking fell back, when it did.")
    results = SkillSummarySerializer(many=True)


class ToolAnnotationsSerializer(serializers.Serializer):
    readOnlyHint = serializers.BooleanField()  # noqa: N815 (MCP's names)
    destructiveHint = serializers.BooleanField()  # noqa: N815
    idempotentHint = serializers.BooleanField()  # noqa: N815
    openWorldHint = serializers.BooleanField()  # noqa: N815


class ToolDefinitionSerializer(serializers.Serializer):
    """One tool as the provider expects it: openai {type, name, description, parameters, strict}, anthropic
    {name, description, input_schema}, mcp {name, title, description, inputSchema, outputSchema, annotations}."""

    name = serializers.CharField()
    description = serializers.CharField()
    type = serializers.ChoiceField(choices=["function"], required=False)
    parameters = serializers.DictField(required=False, help_text="openai: the skill's input schema.")
    strict = serializers.BooleanField(required=False)
    input_schema = serializers.DictField(required=False, help_text="anthropic: the skill's input schema.")
    title = serializers.CharField(required=False)
    inputSchema = serializers.DictField(required=False, help_text="mcp: the skill's input schema.")  # noqa: N815
    outputSchema = serializers.DictField(required=False, help_text="mcp: the skill's output schema.")  # noqa: N815
    annotations = ToolAnnotationsSerializer(required=False)


class ToolDefinitionsSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["openai", "anthropic", "mcp"])
    snapshot = serializers.IntegerField()
    tools = ToolDefinitionSerializer(many=True)


# --- owners -----------------------------------------------------------------------------------


class ManifestCheckSerializer(serializers.Serializer):
    errors = ProblemSerializer(many=True, help_text="Why the manifest would be refused; empty when it is valid.")
    warnings = ProblemSerializer(many=True, help_text="Advice that does not block publication.")


class VersionBriefSerializer(serializers.Serializer):
    version = serializers.CharField()
    status = serializers.CharField()
    effect = serializers.CharField()


class SkillSerializer(serializers.Serializer):
    skill_id = serializers.CharField()
    name = serializers.CharField()
    namespace = serializers.CharField()
    owner_team = serializers.CharField()
    versions = VersionBriefSerializer(many=True)


class SkillListSerializer(serializers.Serializer):
    skills = SkillSerializer(many=True)


class SkillVersionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.CharField()
    status = serializers.CharField()
    effect = serializers.CharField()
    data_classification = serializers.CharField()
    review_reasons = serializers.ListField(
        child=serializers.CharField(), allow_null=True, help_text="Why publishing it needs a second person's review."
    )
    created_at = serializers.DateTimeField()
    published_at = serializers.DateTimeField(allow_null=True)
    manifest = serializers.DictField(help_text="The manifest as in effect (see /api/v1/skills/manifest-schema).")


class DraftVersionSerializer(SkillVersionSerializer):
    warnings = ProblemSerializer(many=True, help_text="Lint advice that does not block publication.")


class SkillDetailSerializer(SkillSerializer):
    versions = SkillVersionSerializer(many=True)


class SkillStatusSerializer(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=["deprecated", "retired"])


class ChangeSerializer(serializers.Serializer):
    path = serializers.CharField()
    kind = serializers.ChoiceField(choices=["added", "removed", "changed"])
    detail = serializers.CharField()
    breaking = serializers.BooleanField()


class DiffSerializer(serializers.Serializer):
    from_version = serializers.CharField()
    to = serializers.CharField()
    changes = ChangeSerializer(many=True)

    def get_fields(self) -> dict:
        fields = super().get_fields()
        fields = {"from": fields.pop("from_version"), **fields}  # `from` is a Python keyword
        return fields


class NamespaceClaimRequestSerializer(serializers.Serializer):
    namespace = serializers.CharField(max_length=100, help_text="For example billing or support.email.")
    team = serializers.SlugField(max_length=63, help_text="The team that is to own it.")


class NamespaceClaimSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    team = serializers.CharField()
    status = serializers.ChoiceField(choices=["requested", "approved"])
    requested_by = serializers.CharField(allow_null=True)
    decided_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class NamespaceClaimListSerializer(serializers.Serializer):
    namespaces = NamespaceClaimSerializer(many=True)


# --- staged rollout ---------------------------------------------------------------------------


class RolloutRequestSerializer(serializers.Serializer):
    """Either tenants or percent; checked by registry.rollouts.parse_stage, which answers typed errors."""

    tenants = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Canary tenants' slugs: only they get the version."
    )
    percent = serializers.IntegerField(
        required=False, min_value=1, max_value=99, help_text="Share of runs (1 to 99), chosen stably per run."
    )
    publish = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Publish a draft straight into this stage (a version in review enters it when approved).",
    )


class RolloutSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    state = serializers.ChoiceField(choices=["staged", "promoted", "rolled_back"])
    status = serializers.CharField(help_text="The version's own status: active, or in_review until approved.")
    baseline = serializers.CharField(allow_null=True, help_text="The version everyone outside the stage is on.")
    tenants = serializers.ListField(child=serializers.CharField(), help_text="Canary tenants (staged only).")
    percent = serializers.IntegerField(allow_null=True)
    snapshot = serializers.IntegerField(help_text="The snapshot that made the change live.")
