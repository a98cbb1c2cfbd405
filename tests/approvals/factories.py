"""Small factories for approval tests: a call paused for approval, stored as the gate stores it.

The world is the one production has, so the real executor can run an approved call: an active
skill version whose downstream is the real refund tool (tests/approvals/worker_tools.py), a grant
for the agent's role, a run pinned to a published snapshot that holds both, and a call with its
raw arguments sealed, its idempotency key claimed and its stored arguments redacted.
"""

from __future__ import annotations

import itertools
from typing import Any

from django.db import transaction

from console.models import Agent, Tenant
from lib.canonical import sha256_of
from lib.sealing import seal
from policies.models import Grant
from registry.models import SkillVersion, VersionStatus
from registry.snapshots import latest_snapshot, publish_snapshot
from runs.models import CallStatus, IdempotencyRecord, Run, RunStatus, ToolCall, Verdict
from tests.approvals.gate_world import create_active_version, downstream_manifest
from traces.redaction import redact

_numbers = itertools.count(1000)

REFUND_SCHEMA = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string"},
        "amount_cents": {"type": "integer", "minimum": 1, "maximum": 100000},
        "card_token": {"type": "string", "x-sensitive": True},
        "note": {"type": "string"},
    },
    "required": ["customer_id", "amount_cents"],
    "additionalProperties": False,
}
GRANTED_NAMESPACES = ("billing", "iam")


def make_skill_version(
    *,
    name: str = "billing.create_refund",
    approval: str = "required",
    ttl_seconds: int | None = None,
    schema: dict | None = None,
) -> SkillVersion:
    """An active, published version of `name` executed by the refund downstream.

    Asking twice for the same kind of version returns the first one, so that the calls of one run
    share it. A call resolves its skill by name, to the newest active version: a test that needs two
    kinds of one skill at once should give them different names.
    """
    body = downstream_manifest(
        name,
        schema=schema or REFUND_SCHEMA,
        approval=approval,
        ttl_seconds=ttl_seconds,
        version=f"1.0.{next(_numbers)}",
        team_slug="billing-platform",
    )
    for existing in SkillVersion.objects.filter(skill__name=name, status=VersionStatus.ACTIVE):
        if {**existing.manifest, "version": body["version"]} == body:
            return existing
    return create_active_version(body)


def _grant(tenant: Tenant, agent_role: str) -> None:
    """Grants covering the test skills for the agent's role, in a published snapshot."""
    created = [
        Grant.objects.get_or_create(
            tenant=tenant, agent_role=agent_role, skill_pattern=f"{namespace}.*", revoked_at=None, expires_at=None
        )[1]
        for namespace in GRANTED_NAMESPACES
    ]
    if any(created):
        publish_snapshot(reason=f"approvals test grants for {tenant.slug} {agent_role}")


def make_run(
    *, tenant: Tenant, agent: Agent, end_user: str = "customer-7", callback_url: str = "", webhook_secret: str = ""
) -> Run:
    """An open run of `agent`, paused on approvals, pinned to a snapshot with the refund skill and the grants."""
    make_skill_version()
    _grant(tenant, agent.role)
    return Run.objects.create(
        tenant=tenant,
        agent=agent,
        end_user=end_user,
        task="refund a duplicate charge",
        snapshot=latest_snapshot(),
        callback_url=callback_url,
        webhook_secret=webhook_secret,
        status=RunStatus.PAUSED,
        status_reason="waiting on approval",
    )


DEFAULT_ARGUMENTS = {"customer_id": "c-42", "amount_cents": 1250, "card_token": "tok_live_secret", "note": "duplicate"}


def make_paused_call(
    *, run: Run, skill_version: SkillVersion | None = None, call_id: str | None = None, arguments: dict | None = None
) -> ToolCall:
    """A call the gate judged `confirm`, stored as the gate stores it (runs.gate._confirm)."""
    skill_version = skill_version or make_skill_version()
    raw = dict(arguments or DEFAULT_ARGUMENTS)
    call_id = call_id or f"c{next(_numbers)}"
    call = ToolCall.objects.create(
        run=run,
        call_id=call_id,
        name=skill_version.skill.name,
        skill_version=skill_version,
        effect=skill_version.effect,
        sealed_arguments=seal(raw),
        arguments_sha256=sha256_of(raw),
        arguments=redact(
            raw,
            schema=skill_version.manifest.get("input_schema"),
            data_classification=skill_version.data_classification,
        ),
        idempotency_key=f"{run.pk}:{call_id}",  # the gate's key for a mutating call that brings none
        status=CallStatus.AWAITING_APPROVAL,
        verdict=Verdict.CONFIRM,
        decision={
            "rule_id": "refund-needs-human",
            "policy_version": "7",
            "reason": "refunds need a person",
            "verdict": "confirm",
        },
    )
    IdempotencyRecord.objects.create(
        tenant_id=run.tenant_id,
        key=call.idempotency_key,
        arguments_sha256=call.arguments_sha256,
        skill_name=call.name,
        call=call,
    )
    return call


DECISION = {
    "rule_id": "refund-needs-human",
    "scope": "tenant",
    "policy_version": "7",
    "reason": "Refunds over 10 EUR need a person",
    "verdict": "confirm",
    "taint_source": "read inbound email",
}


def open_request(*, tenant: Tenant, agent: Agent, **kwargs: Any):
    """A pending approval request for a paused call, opened as the gate opens it."""
    from approvals.services import open_approval_request

    run_kwargs = {k: kwargs.pop(k) for k in ("end_user", "callback_url", "webhook_secret") if k in kwargs}
    skill_version = kwargs.pop("skill_version", None) or make_skill_version()  # before the run pins its snapshot
    run = kwargs.pop("run", None) or make_run(tenant=tenant, agent=agent, **run_kwargs)
    with transaction.atomic():
        call = make_paused_call(run=run, skill_version=skill_version, **kwargs)
        request = open_approval_request(call=call, decision=DECISION)
        call.result = {  # what the agent got back, with the stored (redacted) arguments
            "call_id": call.call_id,
            "status": "approval_required",
            "is_error": False,
            "approval_id": request.pk,
            "proposed_action": {
                "skill": call.name,
                "version": skill_version.version,
                "effect": call.effect,
                "data_classification": skill_version.data_classification,
                "arguments": call.arguments,
            },
            "reason": request.reason,
            "expires_at": request.expires_at.isoformat(),
        }
        call.save(update_fields=["result"])
    return request
