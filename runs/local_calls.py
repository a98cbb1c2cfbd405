"""Calls the agent's SDK decided itself while Airlock was unreachable, uploaded from its spool.

`record_local_calls(run=..., agent=..., calls=[...])` answers one result per uploaded call, in the order
given: `recorded` (now, or by an earlier upload of the same content: uploading twice is harmless) or
`refused` with a typed error, and the good calls of an upload are recorded whatever the others are.
Each recorded call becomes a ToolCall of the run at its real time (`created_at`/`started_at` = when the
SDK decided, `finished_at` = when the tool returned), its arguments redacted and its result cleaned and
shaped exactly as a reported client result is (runs.client_exec.reported_outcome), with a LocalDecision
beside it and one span on the run's trace, "decided locally under bundle N". The kernel then judges it
again (runs.local_review) with the agent's suspension, its tenant's freeze and the named bundle's window
and opt-in as they stood at `decided_at`, and today's grants and policy; a call it would not allow is
flagged. The version is resolved as the run resolves it (its stages included); one the run no longer gives
it is recorded flagged, never dropped: it ran.

Only `client:` skills of the run's pinned snapshot may be uploaded, with the verdict allow: a call of a
server-side skill never runs outside the gate, so an upload claiming one is refused as forged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from console.incident_history import IncidentHistory
from console.models import Agent
from lib.canonical import sha256_of
from policies.models import IssuedBundle, IssuedBundleNumber
from registry.models import Snapshot
from registry.snapshots import ResolvedSkill, index_for
from registry.stages import Audience
from runs import client_exec, lifecycle, local_audit, local_review, ratelimit
from runs.errors import CallError, Conflict, NotFound, NotPermitted, ValidationFailed
from runs.models import CallStatus, LocalDecision, Run, ToolCall, Verdict
from traces.recording import record_span_safely
from traces.redaction import redact, redact_text

MAX_UPLOAD = 100  # calls per request; the SDK sends its spool in batches of this size
CLOCK_SKEW = timedelta(seconds=60)  # how far ahead of Airlock's clock an agent's clock may run
SPOOL_STATUSES = ("decided", "succeeded", "failed")
OUTCOME_UNKNOWN = {
    "class": "unavailable",
    "code": "local_outcome_unknown",
    "message": "The agent's process stopped after deciding this call locally and before it recorded the "
    "outcome: whether the tool ran is unknown.",
}


@dataclass(frozen=True)
class LocalCall:
    """One uploaded call, checked."""

    call_id: str
    skill: ResolvedSkill
    resolves: bool  # False: the run's snapshot no longer gives this run that version (recorded flagged)
    arguments: dict
    reason: str
    bundle_number: int
    issued: IssuedBundleNumber | None  # the bundle as it was issued (None: before Airlock kept them)
    decided_at: datetime
    status: str
    result: Any
    error: dict | None
    finished_at: datetime | None
    sequence: int
    content_sha256: str


@dataclass(frozen=True)
class Upload:
    """What every call of one upload is judged against, read once: the agent's suspensions and its tenant's
    freezes (console.incident_history), the highest bundle number issued to it, and the bundles the calls name
    as they were issued."""

    history: IncidentHistory
    highest_bundle: int
    bundles: dict[int, IssuedBundleNumber]

    @classmethod
    def of(cls, agent: Agent, calls: list) -> Upload:
        named = [raw.get("bundle_number") for raw in calls if isinstance(raw, dict)]  # any JSON: checked per call
        numbers = {n for n in named if isinstance(n, int) and not isinstance(n, bool)}
        return cls(
            history=IncidentHistory.of(agent),
            highest_bundle=highest_issued_bundle(agent),
            bundles={b.number: b for b in IssuedBundleNumber.objects.filter(agent=agent, number__in=numbers)},
        )

    def check_bundle_number(self, number: int) -> None:
        """A call decided under a bundle Airlock never issued to this agent is forged."""
        if number > self.highest_bundle:
            raise NotPermitted(
                f"Bundle {number} was never issued to this agent (the highest is {self.highest_bundle}).",
                code="unknown_bundle",
            )


def highest_issued_bundle(agent: Agent) -> int:
    """The highest decision-bundle number issued to this agent (0 when none was ever issued)."""
    return IssuedBundle.objects.filter(agent=agent).values_list("number", flat=True).first() or 0


def _field_error(field: str, message: str, code: str = "malformed_local_call") -> ValidationFailed:
    return ValidationFailed(f"{field}: {message}", code=code, fields=[{"field": field, "message": message}])


def _when(raw: dict, field: str, *, required: bool) -> datetime | None:
    value = raw.get(field)
    if value is None and not required:
        return None
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # shaped as a time, naming none (checked for the whole upload first: impossible_time)
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise _field_error(field, "an ISO 8601 time with its UTC offset", code="invalid_time")
    return parsed


def impossible_time(calls: list) -> ValidationFailed | None:
    """The first time in the upload written as ISO 8601 but naming no moment (February 30, hour 25, an offset
    of +99:00). The SDK never spools one, so the whole upload is refused and nothing of it recorded."""
    for index, raw in enumerate(calls):
        for field in ("decided_at", "finished_at"):
            value = raw.get(field) if isinstance(raw, dict) else None
            try:
                parse_datetime(value) if isinstance(value, str) else None
            except ValueError as exc:
                where = f"calls[{index}].{field}"
                message = f"{value[:40]!r} is not a real time ({exc})"
                return ValidationFailed(
                    f"{where}: {message}; nothing of this upload was recorded.",
                    code="invalid_time",
                    fields=[{"field": where, "message": message}],
                )
    return None


def _string(raw: dict, field: str, limit: int, *, required: bool = True) -> str:
    value = raw.get(field, "" if not required else None)
    if not isinstance(value, str) or (required and not value.strip()) or len(value) > limit:
        raise _field_error(field, f"a string of at most {limit} characters")
    return value


def _checked_times(raw: dict, run: Run, now: datetime) -> tuple[datetime, datetime | None]:
    decided_at = _when(raw, "decided_at", required=True)
    finished_at = _when(raw, "finished_at", required=raw.get("status") in ("succeeded", "failed"))
    if decided_at > now + CLOCK_SKEW or (finished_at and finished_at > now + CLOCK_SKEW):
        raise _field_error("decided_at", "in the future by Airlock's clock", code="time_in_future")
    if decided_at < run.created_at - CLOCK_SKEW:
        raise _field_error("decided_at", "before the run started", code="decided_before_run")
    if finished_at is not None and finished_at < decided_at:
        raise _field_error("finished_at", "before the call was decided", code="finished_before_decided")
    return decided_at, finished_at


def _skill_of_call(run: Run, name: str, version: str, issued: IssuedBundleNumber | None) -> tuple[ResolvedSkill, bool]:
    """The version the call names as the run resolves it (its stages included: registry.stages), and whether
    it does. A version the run does not give it is still recorded, flagged, when the run's snapshot or the
    snapshot of the bundle it was decided under holds it (a canary of other tenants, a version rolled back,
    past its sunset, or published after the run started): it ran. One neither ever held is refused."""
    index = index_for(run.snapshot)
    skill = index.resolve(name, version or None, audience=Audience.of_run(run))
    if skill is not None:
        return skill, True
    entry = index.entry(name, version) if version else None
    if entry is None and version and issued is not None and issued.snapshot_number != run.snapshot.number:
        snapshot = Snapshot.objects.filter(number=issued.snapshot_number).first()
        entry = index_for(snapshot).entry(name, version) if snapshot is not None else None
    if entry is None:
        raise NotFound(f"The run's snapshot has no skill {name} {version}".rstrip() + ".", code="unknown_skill")
    return ResolvedSkill.from_entry(entry), False


def parse_local_call(raw: Any, *, run: Run, upload: Upload, now: datetime) -> LocalCall:
    """The uploaded call, or the typed reason it is refused."""
    if not isinstance(raw, dict):
        raise ValidationFailed("Each uploaded call must be an object.", code="malformed_local_call")
    call_id = redact_text(_string(raw, "call_id", 200))
    if raw.get("run_id") not in (None, str(run.pk)):
        raise _field_error("run_id", "not this run", code="wrong_run")
    name, version = _string(raw, "skill", 200), _string(raw, "version", 64, required=False)
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, dict):
        raise _field_error("arguments", "an object")
    if raw.get("verdict") != Verdict.ALLOW:
        raise _field_error("verdict", "only calls the SDK allowed are run and uploaded", code="not_allowed_locally")
    bundle = raw.get("bundle_number")
    if not isinstance(bundle, int) or isinstance(bundle, bool) or bundle < 1:
        raise _field_error("bundle_number", "a positive integer")
    status = raw.get("status")
    if status not in SPOOL_STATUSES:
        raise _field_error("status", f"one of {', '.join(SPOOL_STATUSES)}")
    error = raw.get("error")
    if error is not None and not isinstance(error, dict):
        raise _field_error("error", "an object with a message")
    sequence = raw.get("sequence", 0)
    if not isinstance(sequence, int) or isinstance(sequence, bool) or not 0 <= sequence < 2**31:
        raise _field_error("sequence", "a non-negative integer")
    decided_at, finished_at = _checked_times(raw, run, now)
    upload.check_bundle_number(bundle)
    issued = upload.bundles.get(bundle)
    skill, resolves = _skill_of_call(run, name, version, issued)
    if not client_exec.is_client_skill(skill.manifest):
        raise NotPermitted(
            f"{name} runs on Airlock's side; only skills the agent executes itself are decided locally.",
            code="not_client_executed",
        )
    content = {
        key: raw.get(key) for key in ("skill", "version", "arguments", "verdict", "reason", "status", "result", "error")
    }
    content.update(bundle_number=bundle, decided_at=decided_at.isoformat(), finished_at=_iso(finished_at))
    try:
        content_sha256 = sha256_of(content)
    except Exception as exc:  # rfc8785 refuses NaN and integers past 2**53
        raise _field_error("result", "plain JSON (no NaN, no integers beyond 2**53)") from exc
    return LocalCall(
        call_id=call_id,
        skill=skill,
        resolves=resolves,
        arguments=arguments,
        reason=redact_text(str(raw.get("reason") or ""), limit=300),
        bundle_number=bundle,
        issued=issued,
        decided_at=decided_at,
        status=status,
        result=raw.get("result"),
        error=error,
        finished_at=finished_at,
        sequence=sequence,
        content_sha256=content_sha256,
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def answer_of(call: ToolCall) -> dict:
    """What an upload answers for a recorded call; the same for every upload of it."""
    local = call.local
    return {
        "call_id": call.call_id,
        "status": "recorded",
        "call_status": call.status,
        "bundle_number": local.bundle_number,
        "flagged": local.flagged,
    }


def _refused(raw: Any, error: CallError) -> dict:
    call_id = raw.get("call_id") if isinstance(raw, dict) else None
    call_id = redact_text(call_id) if isinstance(call_id, str) else None
    return {"call_id": call_id, "status": "refused", "error": error.as_error()}


def record_local_calls(*, run: Run, agent: Agent, calls: list) -> list[dict]:
    """Record each uploaded call once; one answer per call, in the order given. Two refusals of the whole
    upload are raised first, with nothing recorded: an impossible time (`impossible_time`, ValidationFailed)
    and the agent's rate limit (RateLimited: the calls count against the agent as the gate's do, and while
    its minute is used up the SDK keeps them in its spool and sends them again after `retry_after`)."""
    refused = impossible_time(calls)
    if refused is not None:
        raise refused
    ratelimit.check_agent(agent.pk, calls=len(calls))  # RateLimited: the whole upload waits, nothing recorded
    now, answers, seen, upload = timezone.now(), [], set(), Upload.of(agent, calls)
    for raw in calls:
        try:
            local = parse_local_call(raw, run=run, upload=upload, now=now)
            if local.call_id in seen:
                raise ValidationFailed(
                    f"call_id {local.call_id} appears twice in this upload.", code="duplicate_call_id"
                )
            seen.add(local.call_id)
            answers.append(_record(run=run, upload=upload, local=local))
        except CallError as exc:
            answers.append(_refused(raw, exc))
    return answers


def _existing(run: Run, local: LocalCall) -> dict | None:
    """The answer for a call id already recorded with this content; a conflict for any other."""
    call = ToolCall.objects.filter(run=run, call_id=local.call_id).select_related("local").first()
    if call is None:
        return None
    recorded = getattr(call, "local", None)  # None for a call the gate recorded
    if recorded is None or recorded.content_sha256 != local.content_sha256:
        raise Conflict(
            f"call_id {local.call_id} is already recorded in this run with other content; a spooled call is "
            "uploaded unchanged.",
            code="call_id_conflict",
        )
    return answer_of(call)


def _record(*, run: Run, upload: Upload, local: LocalCall) -> dict:
    answer = _existing(run, local)
    if answer is not None:
        return answer
    try:
        with transaction.atomic():
            call = _insert(run=run, upload=upload, local=local)
    except IntegrityError:  # a concurrent upload of the same call won
        answer = _existing(run, local)
        if answer is None:
            raise
        return answer
    return answer_of(call)


def _insert(*, run: Run, upload: Upload, local: LocalCall) -> ToolCall:
    skill = local.skill
    call = ToolCall(
        run=run,
        call_id=local.call_id,
        position=local.sequence,
        name=skill.name,
        requested_version=skill.version,
        skill_version_id=skill.skill_version_id,
        effect=skill.effect,
        arguments=redact(
            local.arguments, schema=skill.manifest.get("input_schema"), data_classification=skill.data_classification
        ),
        arguments_sha256=sha256_of(local.arguments),
        verdict=Verdict.ALLOW,
        created_at=local.decided_at,
        started_at=local.decided_at,
        finished_at=local.finished_at or local.decided_at,
        attempts=1,
    )
    if local.status == "decided":
        status, fields, recorded = CallStatus.FAILED, {"error_class": OUTCOME_UNKNOWN["class"]}, {}
        result = {"call_id": call.call_id, "status": "error", "is_error": True, "error": dict(OUTCOME_UNKNOWN)}
    else:
        error = (local.error or {"message": "The client-executed skill failed."}) if local.status == "failed" else None
        status, result, fields, recorded = client_exec.reported_outcome(call, content=local.result, error=error)
    lifecycle.first_status(call, status)
    for name, value in fields.items():
        setattr(call, name, value)
    call.result = result
    call.decision = {
        "verdict": Verdict.ALLOW,
        "scope": "local",
        "reason": local.reason or f"decided by the SDK under bundle {local.bundle_number}",
        "local": {"bundle_number": local.bundle_number, "decided_at": local.decided_at.isoformat()},
        **recorded,
    }
    call.save(force_insert=True)
    agent, tenant = local_review.standing_when_decided(upload.history, local.decided_at)
    flag = local_review.reevaluate(
        run=run,
        agent=agent,
        tenant=tenant,
        bundle=local_review.bundle_when_decided(local.issued, local.bundle_number, local.decided_at),
        skill=skill,
        resolves=local.resolves,
        arguments=local.arguments,
        decided_at=local.decided_at,
    )
    call.local = LocalDecision.objects.create(
        call=call,
        bundle_number=local.bundle_number,
        decided_at=local.decided_at,
        local_reason=local.reason,
        content_sha256=local.content_sha256,
        flagged=flag is not None,
        flag_verdict=flag.verdict if flag else "",
        flag_reason=flag.reason[:500] if flag else "",
    )
    if flag is not None:  # its audit row, which outlives the run under retention
        local_audit.record_flag(
            call=call,
            agent_id=run.agent_id,
            agent_name=run.agent.name,
            verdict=flag.verdict,
            reason=flag.reason,
            code=flag.code,
            rule_id=flag.rule_id,
        )
    if status == CallStatus.SUCCEEDED and client_exec.returns_untrusted(call):
        client_exec.taint_run(run, f"{call.name} ({call.call_id}) returned untrusted content")
    _record_span(call=call, local=local, flag=flag)
    if flag is not None:
        transaction.on_commit(lambda: local_review.notify_flagged(call_pk=call.pk))
    return call


def _record_span(*, call: ToolCall, local: LocalCall, flag: local_review.Flag | None) -> None:
    attributes: dict[str, Any] = {
        "airlock.execution": "client",
        "airlock.decided_locally": True,
        "airlock.local.bundle_number": local.bundle_number,
        "airlock.local.decided_at": local.decided_at.isoformat(),
    }
    if flag is not None:
        attributes.update(
            {
                "airlock.local.flagged": True,
                "airlock.local.flag_verdict": flag.verdict,
                "airlock.local.flag": flag.reason,
            }
        )
    record_span_safely(
        what="the span of a call decided locally",
        run=call.run,
        kind="tool_call",
        name=f"{call.name} (decided locally under bundle {local.bundle_number})",
        started_at=local.decided_at,
        ended_at=call.finished_at,
        call=call,
        skill_name=call.name,
        skill_version=local.skill.version,
        verdict=Verdict.ALLOW,
        outcome="error" if call.result.get("is_error") else "ok",
        error_class=call.error_class,
        attributes=attributes,
    )


__all__ = [
    "CLOCK_SKEW",
    "MAX_UPLOAD",
    "Upload",
    "answer_of",
    "highest_issued_bundle",
    "impossible_time",
    "record_local_calls",
]
