"""Long-running skills: the adapter answered with a job id; follow it to the end, then deliver.

The job is started once, by the call itself (the call's idempotency key guards a repeat). After
that only its status is read: by callback (`POST /api/v1/jobs/<token>/complete`) or by bounded
status checks with backoff. Each check claims the row with a short lease, so a restarted worker
or a duplicate task never follows a job twice at once, and never starts it again.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import timedelta

from airlock_sdk import fencing
from airlock_sdk.policy.kernel import Path
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from lib.public_url import public_reverse
from registry.notifications import notify_owners
from reliability import reconcile, tasks
from reliability.models import JobStatus, LongJob
from runs.authorization import recorded_call_refusal
from runs.errors import CallError
from runs.models import CallStatus, Run, ToolCall
from runs.plane import contracts
from runs.plane.asking import ask
from runs.plane.delivery import deliver_final_result
from runs.shaping import shape
from traces.redaction import redact_text

logger = logging.getLogger(__name__)
LEASE = timedelta(seconds=60)


def job_config() -> dict:
    return {
        "first_check_s": settings.AIRLOCK_JOB_FIRST_CHECK_SECONDS,
        "base_s": settings.AIRLOCK_JOB_CHECK_BASE_SECONDS,
        "cap_s": settings.AIRLOCK_JOB_CHECK_CAP_SECONDS,
        "max_checks": settings.AIRLOCK_JOB_MAX_CHECKS,
    }


def callback_token_for(run_id: str, call_id: str) -> str:
    return hmac.new(
        settings.SECRET_KEY.encode(), f"airlock-job:{run_id}:{call_id}".encode(), hashlib.sha256
    ).hexdigest()[:48]


def callback_url_for(run_id: str, call_id: str) -> str:
    """Sent to long-running tools as X-Airlock-Callback (absolute, under AIRLOCK_PUBLIC_URL); they POST the
    job's end there."""
    return public_reverse("reliability_api:job_complete", args=[callback_token_for(run_id, call_id)])


def accepted_content(job: LongJob) -> dict:
    return {
        "job": {"id": job.job_id, "status": job.status},
        "message": "The skill started a long-running job; its result arrives as a call.completed event on "
        "this run. Do not call the skill again for the same work.",
    }


def register_job(*, run: Run, call_id: str, skill: str, job_id: str) -> dict:
    """Record the job once and schedule its first status check; what the agent gets meanwhile."""
    job, created = LongJob.objects.get_or_create(
        run=run,
        call_id=call_id,
        defaults={
            "tenant_id": run.tenant_id,
            "skill_name": skill,
            "job_id": job_id,
            "callback_token": callback_token_for(str(run.pk), call_id),
            "next_check_at": timezone.now() + timedelta(seconds=job_config()["first_check_s"]),
        },
    )
    if created:
        transaction.on_commit(
            lambda: tasks.follow_job.apply_async(args=[job.pk], countdown=job_config()["first_check_s"])
        )
    return accepted_content(job)


def _claim(job: LongJob) -> bool:
    now = timezone.now()
    return bool(
        LongJob.objects.filter(
            Q(claimed_until__isnull=True) | Q(claimed_until__lt=now), pk=job.pk, status=JobStatus.RUNNING
        ).update(claimed_until=now + LEASE)
    )


def _call_of(job: LongJob) -> ToolCall | None:
    return (
        ToolCall.objects.select_related("run__tenant", "run__agent", "run__snapshot", "skill_version")
        .filter(run_id=job.run_id, call_id=job.call_id)
        .first()
    )


def check_job(*, job_id: int) -> LongJob:
    """One bounded status check; reschedules itself with backoff through `next_check_at`."""
    job = LongJob.objects.get(pk=job_id)
    if not job.is_running or not _claim(job):
        return job
    call = _call_of(job)
    if call is None or call.status == CallStatus.EXECUTING:
        return _release(job, checked=False, why="the call is still being recorded")
    if job_refusal(call) is not None:  # nothing more is asked of the downstream for a call no longer allowed
        return complete_job(job=job, succeeded=False)
    manifest = call.skill_version.manifest if call.skill_version else {}
    target = manifest.get("execution", {}).get("job_status", "")
    if not target:
        return _release(job, checked=True, why="the skill declares no job_status; waiting for its callback")
    try:
        answer = ask(
            manifest=manifest,
            target=target,
            field="job_id",
            value=job.job_id,
            tenant_slug=call.run.tenant.slug,
            end_user=call.run.end_user,
        )
    except CallError as exc:
        return _release(job, checked=True, why=exc.message)
    if answer["status"] in ("succeeded", "failed"):
        return complete_job(
            job=job,
            succeeded=answer["status"] == "succeeded",
            content=answer.get("result"),
            message=str(answer.get("error") or ""),
        )
    return _release(job, checked=True, why=f"the job is {answer['status']}")


def _release(job: LongJob, *, checked: bool, why: str) -> LongJob:
    config = job_config()
    checks = job.checks + (1 if checked else 0)
    if checks >= config["max_checks"]:
        LongJob.objects.filter(pk=job.pk).update(
            status=JobStatus.GAVE_UP,
            checks=checks,
            claimed_until=None,
            last_error=f"gave up after {checks} checks: {why}"[:300],
            finished_at=timezone.now(),
            next_check_at=None,
        )
        call = _call_of(job)
        if call is not None:
            reconcile.open_reconciliation(
                call=call, reason="timeout", note="The long-running job never reported an end."
            )
    else:
        delay = min(config["cap_s"], config["base_s"] * 2**checks)
        LongJob.objects.filter(pk=job.pk).update(
            checks=F("checks") + (1 if checked else 0),
            claimed_until=None,
            last_error=why[:300],
            next_check_at=timezone.now() + timedelta(seconds=delay),
        )
    job.refresh_from_db()
    return job


def complete_job(*, job: LongJob, succeeded: bool, content=None, message: str = "") -> LongJob:
    """The job ended: check and clean its result, deliver it to the call and the run (once)."""
    status = JobStatus.SUCCEEDED if succeeded else JobStatus.FAILED
    with transaction.atomic():
        if not LongJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
            status=status, finished_at=timezone.now(), claimed_until=None, next_check_at=None
        ):
            job.refresh_from_db()
            return job
        call = _call_of(job)
        refusal = job_refusal(call)
        if refusal is not None:
            result = {"call_id": call.call_id, "status": "error", "is_error": True, "error": refusal.as_error()}
            status = JobStatus.GAVE_UP
            LongJob.objects.filter(pk=job.pk).update(status=status, last_error=refusal.message[:300])
            call_status = CallStatus.DECLINED if refusal.error_class == "declined" else CallStatus.DENIED
        else:
            result = _final_result(call, succeeded=succeeded, content=content, message=message)
            call_status = CallStatus.SUCCEEDED if result["status"] == "ok" else CallStatus.FAILED
        LongJob.objects.filter(pk=job.pk).update(result=result)
        deliver_final_result(
            call=call,
            result=result,
            status=call_status,
            error_class=(result.get("error") or {}).get("class", ""),
            span_name=f"{call.name} job {job.job_id} {status}",
            attributes={"airlock.job.id": job.job_id, "airlock.job.status": status},
        )
    job.refresh_from_db()
    return job


def job_refusal(call: ToolCall) -> CallError | None:
    """The live checks every execution passes (agent, grant, skill, run), before a job's end is delivered:
    a revoked agent gets no result, and a closed run receives nothing more."""
    return recorded_call_refusal(path=Path.LONG_JOB_END, call=call, arguments=None, approved_verdict="confirm")


def _final_result(call: ToolCall, *, succeeded: bool, content, message: str) -> dict:
    manifest = call.skill_version.manifest if call.skill_version else {}
    skill = {"name": call.name, "version": call.skill_version.version if call.skill_version else ""}
    if not succeeded:
        return {
            "call_id": call.call_id,
            "status": "error",
            "is_error": True,
            "error": {
                "class": "unavailable",
                "code": "job_failed",
                "message": "The long-running job failed"
                + (f": {redact_text(fencing.clean_text(message[:300])[0])}" if message else "."),
            },
        }
    problem = contracts.violation(content, manifest.get("output_schema"))
    if problem:
        notify_owners(
            skill_name=call.name,
            dedupe_key=f"contract:{call.name}:{skill['version']}",
            subject=f"{call.name} {skill['version']} job result breaks its output_schema",
            body=f"Where: {problem}\nRun: {call.run_id}, call {call.call_id}.",
        )
        return {
            "call_id": call.call_id,
            "status": "error",
            "is_error": True,
            "error": {"class": "internal", "code": "contract_violation", "message": contracts.UNEXPECTED_SHAPE},
        }
    cleaned = fencing.clean(content)
    shaped = shape(
        cleaned.content,
        manifest.get("execution", {}).get("result_limit_bytes"),
        output_schema=manifest.get("output_schema"),
    )
    return {
        "call_id": call.call_id,
        "status": "ok",
        "is_error": False,
        "content": shaped.content,
        "skill": skill,
        "truncated": shaped.truncated,
        "warnings": [],
        "provenance": fencing.provenance(
            skill=call.name,
            version=skill["version"],
            adapter=manifest.get("execution", {}).get("adapter", ""),
            untrusted=True,
            removed=cleaned.removed,
        ),
    }


def due_jobs(limit: int = 100) -> list[int]:
    return list(
        LongJob.objects.filter(status=JobStatus.RUNNING, next_check_at__lte=timezone.now()).values_list(
            "pk", flat=True
        )[:limit]
    )
