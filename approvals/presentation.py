"""The proposed action as an approver reads it: the exact arguments, field by field, and what approving does.

Only members with the approver role in the request's tenant see the real values, unsealed here at
render time while the request is open; everyone else (and everyone, once the call is final and its
raw arguments are dropped) sees the redacted form stored at rest. Fields the skill's schema marks
sensitive and secret-looking strings stay masked for approvers too (`approvals.masking.mask`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from approvals.masking import MASK, mask
from approvals.models import ApprovalRequest
from approvals.services import raw_arguments
from console.models import Role
from console.tenancy import has_role

LONG_TEXT = 120
EMAIL_KEYS = ("to", "cc", "bcc", "subject")


@dataclass
class Field:
    """One argument, ready for a person: its title, what it means, and how to show its value."""

    key: str
    title: str
    description: str
    kind: str  # text, long_text, money, chip, id, number, boolean, masked, redacted, json, empty
    value: Any
    shown: str


@dataclass
class ProposedAction:
    unsealed: bool  # real values (an approver, while the request is open) or the redacted form
    fields: list[Field]
    email: dict[str, Field] | None
    arguments: Any  # what the raw-JSON view and the edit box show
    downstream: str
    credential: str
    idempotency_key: str
    voters: list[str] = field(default_factory=list)

    @property
    def other_fields(self) -> list[Field]:
        """The fields not already shown as the e-mail."""
        shown = {f.key for f in self.email.values()} if self.email else set()
        return [f for f in self.fields if f.key not in shown]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, indent=2, ensure_ascii=False, sort_keys=True)


def _schema(approval: ApprovalRequest) -> dict:
    version = approval.call.skill_version if approval.call_id else None
    manifest = (version.manifest if version is not None else None) or {}
    schema = manifest.get("input_schema")
    return schema if isinstance(schema, dict) else {}


def _manifest(approval: ApprovalRequest) -> dict:
    version = approval.call.skill_version if approval.call_id else None
    return (version.manifest if version is not None else None) or {}


def may_unseal(approval: ApprovalRequest, user, routed_ids: set[int] | None = None) -> bool:
    """Real values only for an approver of the request's tenant whom its routing lets decide it, and only while
    the request is open. Lists pass `routed_ids`, the ids of their requests that `routed_to(user)` holds (one
    query for the list, not one per card); an admin's oversight view lists others, which stay sealed."""
    if not (approval.is_open and approval.call.sealed_arguments):
        return False
    if routed_ids is not None:
        return approval.pk in routed_ids
    return has_role(user, approval.tenant, Role.APPROVER) and approval.routed_to_user(user)


def shown_arguments(approval: ApprovalRequest, user, routed_ids: set[int] | None = None) -> Any:
    """The arguments this user may see: real ones (sensitive fields masked) or the redacted form."""
    if may_unseal(approval, user, routed_ids):
        return mask(raw_arguments(approval.call), _schema(approval))
    return approval.action.get("arguments")


def downstream_of(manifest: dict) -> str:
    """Where approving sends the call, in words: a host, an MCP server, an in-process function, the agent."""
    adapter = str((manifest.get("execution") or {}).get("adapter", ""))
    if adapter.startswith(("http://", "https://")):
        return f"HTTP {urlsplit(adapter).netloc}"
    if adapter.startswith("mcp://"):
        server, _, tool = adapter.removeprefix("mcp://").partition("/")
        return f"MCP server {server}, tool {tool}"
    if adapter.startswith("python:"):
        return f"in-process function {adapter.removeprefix('python:')}"
    if adapter.startswith("client:"):
        return "the agent's own runtime (client-executed)"
    return adapter or "—"


def _title(key: str, schema: dict) -> str:
    if schema.get("title"):
        return str(schema["title"])
    words = key.removesuffix("_cents").replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def _money(cents: int, currency: Any) -> str:
    amount = f"{cents / 100:,.2f}"
    return f"{currency} {amount}" if isinstance(currency, str) and currency and currency != MASK else amount


def _field(key: str, value: Any, schema: dict, siblings: dict) -> Field:
    title, description = _title(key, schema), str(schema.get("description", ""))
    if value == MASK:
        return Field(key, title, description, "masked", value, "hidden (sensitive)")
    if isinstance(value, dict) and value.get("redacted"):
        return Field(key, title, description, "redacted", value, "redacted")
    if value is None or value == "":
        return Field(key, title, description, "empty", value, "—")
    if isinstance(value, bool):
        return Field(key, title, description, "boolean", value, "yes" if value else "no")
    if isinstance(value, int) and key.endswith("_cents"):
        return Field(key, title, description, "money", value, _money(value, siblings.get("currency")))
    if isinstance(value, int | float):
        return Field(key, title, description, "number", value, f"{value:,}")
    if isinstance(value, str):
        if "enum" in schema:
            return Field(key, title, description, "chip", value, value)
        if "\n" in value or len(value) > LONG_TEXT:
            return Field(key, title, description, "long_text", value, value)
        if key.endswith("_id") or key == "id" or str(schema.get("pattern", "")).startswith("^"):
            return Field(key, title, description, "id", value, value)
        return Field(key, title, description, "text", value, value)
    return Field(key, title, description, "json", value, json.dumps(value, ensure_ascii=False, sort_keys=True))


def fields_of(arguments: Any, schema: dict) -> list[Field]:
    """Fields in the schema's order, then any others the agent sent."""
    if not isinstance(arguments, dict) or arguments.get("redacted") is True:
        return []
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    order = [key for key in properties if key in arguments] + sorted(k for k in arguments if k not in properties)
    return [_field(str(key), arguments[key], properties.get(key) or {}, arguments) for key in order]


def _email(fields: list[Field]) -> dict[str, Field] | None:
    by_key = {f.key: f for f in fields}
    body = next((f for f in fields if f.key.startswith("body")), None)
    if "to" not in by_key or "subject" not in by_key or body is None:
        return None
    return {**{key: by_key[key] for key in EMAIL_KEYS if key in by_key}, "body": body}


def proposed_action(approval: ApprovalRequest, user, routed_ids: set[int] | None = None) -> ProposedAction:
    schema, manifest = _schema(approval), _manifest(approval)
    unsealed = may_unseal(approval, user, routed_ids)
    arguments = shown_arguments(approval, user, routed_ids)
    fields = fields_of(arguments, schema)
    execution = manifest.get("execution") or {}
    return ProposedAction(
        unsealed=unsealed,
        fields=fields,
        email=_email(fields),
        arguments=arguments,
        downstream=downstream_of(manifest),
        credential=str(execution.get("credential") or ""),
        idempotency_key=approval.call.idempotency_key if approval.call_id else "",
        voters=[vote.user.get_username() for vote in approval.votes.all()],
    )


def edited_fields(approval: ApprovalRequest) -> list[Field]:
    """What an approver changed, as stored (redacted for confidential skills)."""
    return fields_of(approval.edited_arguments, _schema(approval)) if approval.edited_arguments else []


__all__ = [
    "Field",
    "ProposedAction",
    "downstream_of",
    "edited_fields",
    "fields_of",
    "may_unseal",
    "proposed_action",
    "shown_arguments",
]
