"""Small factories for approval tests: a skill version, a run and a call paused for approval."""

from __future__ import annotations

import itertools
from typing import Any

from console.models import Agent, Team, Tenant
from lib.canonical import sha256_of
from lib.sealing import seal
from registry.models import Skill, SkillVersion, Snapshot
from runs.models import CallStatus, Run, ToolCall, Verdict

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


def make_snapshot() -> Snapshot:
    number = next(_numbers)
    return Snapshot.objects.create(number=number, body={}, canonical_sha256="0" * 64, signature="test",
                                   key_id="test", reason="test")


def make_skill_version(*, name: str = "billing.create_refund", approval: str = "required",
                       ttl_seconds: int | None = None, schema: dict | None = None) -> SkillVersion:
    team, _ = Team.objects.get_or_create(slug="billing-platform", defaults={"name": "Billing"})
    skill, _ = Skill.objects.get_or_create(name=name, defaults={"skill_id": f"skl_{name.replace('.', '_')}",
                                                                "namespace": name.split(".")[0], "owner_team": team})
    risk: dict[str, Any] = {"effect": "external", "data_classification": "confidential", "approval": approval}
    if ttl_seconds is not None:
        risk["approval_ttl_seconds"] = ttl_seconds
    manifest = {"name": name, "version": f"1.0.{next(_numbers)}", "input_schema": schema or REFUND_SCHEMA,
                "risk": risk, "execution": {"adapter": "python:tests.approvals.factories.fake_refund"}}
    return SkillVersion.objects.create(skill=skill, version=manifest["version"], manifest=manifest,
                                       effect="external", status="active")


def make_run(*, tenant: Tenant, agent: Agent, end_user: str = "customer-7", callback_url: str = "",
             webhook_secret: str = "") -> Run:
    return Run.objects.create(tenant=tenant, agent=agent, end_user=end_user, task="refund a duplicate charge",
                              snapshot=make_snapshot(), callback_url=callback_url, webhook_secret=webhook_secret,
                              status="paused")


DEFAULT_ARGUMENTS = {"customer_id": "c-42", "amount_cents": 1250, "card_token": "tok_live_secret",
                     "note": "duplicate"}


def make_paused_call(*, run: Run, skill_version: SkillVersion | None = None, call_id: str | None = None,
                     arguments: dict | None = None) -> ToolCall:
    skill_version = skill_version or make_skill_version()
    raw = dict(arguments or DEFAULT_ARGUMENTS)
    redacted = {**raw, "card_token": "[redacted]"} if "card_token" in raw else raw
    return ToolCall.objects.create(
        run=run, call_id=call_id or f"c{next(_numbers)}", name=skill_version.skill.name,
        skill_version=skill_version, effect="external", arguments=redacted, sealed_arguments=seal(raw),
        arguments_sha256=sha256_of(raw), idempotency_key=f"idem-{next(_numbers)}",
        status=CallStatus.AWAITING_APPROVAL, verdict=Verdict.CONFIRM,
        decision={"rule_id": "refund-needs-human", "policy_version": "7", "reason": "refunds need a person",
                  "verdict": "confirm"},
    )


DECISION = {"rule_id": "refund-needs-human", "scope": "tenant", "policy_version": "7",
            "reason": "Refunds over 10 EUR need a person", "verdict": "confirm", "taint_source": "read inbound email"}


def open_request(*, tenant: Tenant, agent: Agent, **kwargs: Any):
    from approvals.services import open_approval_request

    run_kwargs = {k: kwargs.pop(k) for k in ("end_user", "callback_url", "webhook_secret") if k in kwargs}
    run = kwargs.pop("run", None) or make_run(tenant=tenant, agent=agent, **run_kwargs)
    call = make_paused_call(run=run, **kwargs)
    return open_approval_request(call=call, decision=DECISION)
