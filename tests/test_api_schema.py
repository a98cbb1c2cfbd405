"""The OpenAPI schema types every request and response body of the REST API.

Generated as `manage.py spectacular` (and /api/schema/) generates it. No body, nor anything nested in
one, may be an untyped object (`{"type": "object"}` with no properties, or OpenApiTypes.OBJECT's
`additionalProperties: {}`) or an untyped value (`{}`), except where the JSON is genuinely free-form:
defined by a skill's own schema, or by a JSON Schema document of its own. Those are listed below, by
component and property, each with its reason.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.generators import SchemaGenerator

SKILL_ARGUMENTS = "a call's arguments: shaped by the skill's own input_schema"
SKILL_RESULT = "a tool's result: shaped by the skill's own output_schema (or free when it declares none)"
MANIFEST = (
    "a skill manifest: a JSON Schema (Draft 2020-12) document of its own, served at "
    "/api/v1/skills/manifest-schema; OpenAPI 3.0 cannot embed it"
)
SKILL_SCHEMA = "a JSON Schema written by the skill's owner (input or output schema)"

FREE_FORM = {
    # a skill's arguments
    "ProposedCallRequest.arguments": SKILL_ARGUMENTS,
    "ProposedAction.arguments": SKILL_ARGUMENTS,
    "ApprovalAction.arguments": SKILL_ARGUMENTS,
    "ApprovalDecisionRequest.arguments": SKILL_ARGUMENTS + " (the approver's edited copy)",
    "Approval.edited_arguments": SKILL_ARGUMENTS + " (the approver's edited copy)",
    "CallResult.arguments": SKILL_ARGUMENTS + " (an approver's edit, to run on the agent's side)",
    "PipelineStepSpecRequest.arguments": SKILL_ARGUMENTS,
    "LocalCallRequest.arguments": SKILL_ARGUMENTS + " (decided locally by the SDK, uploaded from its spool)",
    "CompensationRequest.arguments": SKILL_ARGUMENTS + " (of the compensating skill)",
    "Decision.arguments": SKILL_ARGUMENTS + " (masked, as the inbox shows a closed request)",
    "TryCallRequest.arguments": SKILL_ARGUMENTS + " (an owner's try of a version)",
    "Decision.changes": "an edit's changes to " + SKILL_ARGUMENTS + " ({path, op, from, to}, masked)",
    # a tool's result
    "CallResult.content": SKILL_RESULT,
    "ClientResultRequest.content": SKILL_RESULT + " (run by the agent itself)",
    "JobCompleteRequest.result": SKILL_RESULT + " (of a long-running job)",
    "LocalCallRequest.result": SKILL_RESULT + " (run by the agent while Airlock was unreachable)",
    "SkillTry.result": SKILL_RESULT + " (of a try, from the sandbox), or the typed error",
    "ConditionRequest.equals": "compared with a value of an earlier step's result: " + SKILL_RESULT,
    "ConditionRequest.not_equals": "compared with a value of an earlier step's result: " + SKILL_RESULT,
    # manifests and the JSON Schemas in them
    "ManifestRequest.manifest": MANIFEST,
    "SkillVersion.manifest": MANIFEST,
    "DraftVersion.manifest": MANIFEST,
    "SnapshotEntry.manifest": MANIFEST,
    "GET /api/v1/skills/manifest-schema 200": "the manifest's JSON Schema document itself",
    "ToolDefinition.parameters": SKILL_SCHEMA,
    "ToolDefinition.input_schema": SKILL_SCHEMA,
    "ToolDefinition.inputSchema": SKILL_SCHEMA,
    "ToolDefinition.outputSchema": SKILL_SCHEMA,
    # others
    "SpanRequest.attributes": "an agent's own span attributes (OpenTelemetry style: any keys, redacted on ingest)",
    "ErrorDetail.fields": "DRF's per-field messages, keyed and nested as the refused request body is (or a list "
    "of {field, message}); its shape follows the body's",
}


def _schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def _untyped(node: dict) -> bool:
    if "$ref" in node or any(key in node for key in ("oneOf", "anyOf", "allOf", "enum")):
        return False
    if "type" not in node:
        return True  # {} (OpenApiTypes.ANY, a serializers.JSONField)
    if node["type"] != "object":
        return False
    return not node.get("properties") and node.get("additionalProperties") in (None, True, {})


def _walk(node: Any, where: str, components: dict, seen: set[str], found: dict[str, str]) -> None:
    if not isinstance(node, dict):
        return
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            _walk(components[name], name, components, seen, found)
        return
    if _untyped(node):
        found.setdefault(where, str(node))
        return
    for key, child in (node.get("properties") or {}).items():
        _walk(child, f"{where}.{key}", components, seen, found)
    if isinstance(node.get("additionalProperties"), dict):
        _walk(node["additionalProperties"], f"{where}{{}}", components, seen, found)
    if "items" in node:
        _walk(node["items"], f"{where}[]", components, seen, found)
    for key in ("oneOf", "anyOf", "allOf"):
        for index, child in enumerate(node.get(key, [])):
            _walk(child, f"{where}.{key}[{index}]", components, seen, found)


def _untyped_bodies(schema: dict) -> dict[str, str]:
    components = schema["components"]["schemas"]
    found: dict[str, str] = {}
    seen: set[str] = set()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for media in (operation.get("requestBody") or {}).get("content", {}).values():
                _walk(media.get("schema", {}), f"{method.upper()} {path} request", components, seen, found)
            for status, response in operation["responses"].items():
                for media in response.get("content", {}).values():
                    _walk(media.get("schema", {}), f"{method.upper()} {path} {status}", components, seen, found)
    return found


def _bodies(schema: dict) -> list[tuple[str, str, str]]:
    """(operation, status or 'request', whether it has a schema) of every body the API declares."""
    rows = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            if operation.get("requestBody"):
                rows.append((f"{method.upper()} {path}", "request", operation["requestBody"]))
            for status, response in operation["responses"].items():
                rows.append((f"{method.upper()} {path}", status, response))
    return rows


def test_no_body_is_an_untyped_object_except_the_listed_free_form_ones():
    found = _untyped_bodies(_schema())
    unexpected = {where: node for where, node in found.items() if where not in FREE_FORM}
    assert not unexpected, f"give these a serializer (or list them in FREE_FORM with a reason): {unexpected}"


def test_every_listed_free_form_body_still_exists():
    found = _untyped_bodies(_schema())
    stale = sorted(set(FREE_FORM) - set(found))
    assert not stale, f"no longer free-form, or renamed; drop them from FREE_FORM: {stale}"


def test_every_json_body_has_a_schema():
    missing = []
    for operation, status, body in _bodies(_schema()):
        if status in ("204", "304"):
            continue
        content = body.get("content")
        if not content or any("schema" not in media for media in content.values()):
            missing.append(f"{operation} {status}")
    assert not missing, f"these bodies have no schema: {missing}"


def test_the_schema_only_shapes_of_the_hot_paths_name_the_fields_their_parsers_take():
    """Ingest and the gate check their bodies themselves (no serializer on a hot path); the serializers that
    describe those bodies must name exactly the fields the parsers accept."""
    from runs.api.serializers import ProposedCallSerializer
    from traces import ingest
    from traces.api.serializers import SpanSerializer

    assert set(SpanSerializer().fields) == ingest.BATCH_FIELDS
    assert set(ProposedCallSerializer().fields) == {
        "call_id",
        "name",
        "version",
        "arguments",
        "idempotency_key",
        "taint",
        "view",  # runs.presenting.requested
        "page",
    }
