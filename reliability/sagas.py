"""Pipelines as sagas: ordered skill calls through the gate, compensated best effort on failure.

Every step is an ordinary call of the run (call id `<pipeline>:<step>`, idempotency key
`<run_id>:<step_id>`), so the gate validates, authorizes and judges it like any other, and a
re-run of the task (a restart, a duplicate delivery) replays recorded outcomes instead of acting
twice. A step that needs approval pauses the pipeline until the approval resolves.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

from airlock_sdk.policy.kernel import Path
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from lib.sealing import seal, unseal
from reliability import reconcile, tasks
from reliability.models import Pipeline, PipelineStatus, PipelineStep, StepStatus
from runs.gate import process_batch
from runs.models import CallStatus, Run, ToolCall

logger = logging.getLogger(__name__)
LEASE = timedelta(minutes=5)
MAX_STEPS = 20
_TEMPLATE = re.compile(r"\$\{([A-Za-z0-9_-]+)\.([A-Za-z0-9_.-]+)\}")
_MISSING = object()


class PipelineInvalid(ValueError):
    """The submitted pipeline is malformed; the message says where."""


def _check_steps(steps: Any) -> None:
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise PipelineInvalid(f"steps must be a list of 1 to {MAX_STEPS} steps.")
    seen: set[str] = set()
    for index, step in enumerate(steps):
        where = f"steps[{index}]"
        if not isinstance(step, dict) or not isinstance(step.get("step_id"), str) or not step["step_id"]:
            raise PipelineInvalid(f"{where}.step_id must be a non-empty string.")
        if step["step_id"] in seen or not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", step["step_id"]):
            raise PipelineInvalid(f"{where}.step_id must be unique and use letters, digits, _ or -.")
        if not isinstance(step.get("name"), str) or not isinstance(step.get("arguments", {}), dict):
            raise PipelineInvalid(f"{where} needs a skill name and an arguments object.")
        for condition in step.get("when", []) or []:
            if not isinstance(condition, dict) or condition.get("step") not in seen:
                raise PipelineInvalid(f"{where}.when may only test earlier steps.")
        compensation = step.get("compensation")
        if compensation is not None and (
            not isinstance(compensation, dict)
            or not isinstance(compensation.get("name"), str)
            or not isinstance(compensation.get("arguments", {}), dict)
        ):
            raise PipelineInvalid(f"{where}.compensation must be {{name, arguments}} or null.")
        seen.add(step["step_id"])


def submit_pipeline(*, run: Run, pipeline_id: str, steps: list[dict]) -> tuple[Pipeline, bool]:
    """Store the pipeline (the same id again returns the stored one) and start it after commit."""
    if not isinstance(pipeline_id, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", pipeline_id):
        raise PipelineInvalid("pipeline_id must be 1-100 letters, digits, _ or -.")
    _check_steps(steps)
    with transaction.atomic():
        pipeline, created = Pipeline.objects.get_or_create(
            run=run, pipeline_id=pipeline_id, defaults={"tenant_id": run.tenant_id}
        )
        if created:
            PipelineStep.objects.bulk_create(
                [
                    PipelineStep(
                        pipeline=pipeline,
                        step_id=step["step_id"],
                        position=index,
                        name=step["name"],
                        sealed_arguments=seal(step.get("arguments", {})),
                        preconditions=step.get("when") or [],
                        compensation=(
                            {
                                "name": step["compensation"]["name"],
                                "sealed_arguments": seal(step["compensation"].get("arguments", {})),
                            }
                            if step.get("compensation")
                            else None
                        ),
                    )
                    for index, step in enumerate(steps)
                ]
            )
            transaction.on_commit(lambda: tasks.run_pipeline.delay(pipeline.pk))
    return pipeline, created


def _lookup(receipts: dict[str, dict], step_id: str, path: str) -> Any:
    value: Any = receipts.get(step_id, _MISSING)
    for part in path.split(".") if value is not _MISSING else []:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def fill(value: Any, receipts: dict[str, dict]) -> Any:
    """Replace `${step.path}` in arguments with values from earlier receipts."""
    if isinstance(value, dict):
        return {key: fill(item, receipts) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, receipts) for item in value]
    if isinstance(value, str):
        whole = _TEMPLATE.fullmatch(value)
        if whole:
            found = _lookup(receipts, whole.group(1), whole.group(2))
            return None if found is _MISSING else found
        return _TEMPLATE.sub(lambda m: str(_lookup(receipts, m.group(1), m.group(2))), value)
    return value


def holds(condition: dict, receipts: dict[str, dict]) -> bool:
    found = _lookup(receipts, condition["step"], condition.get("path", "status"))
    if "equals" in condition:
        return found == condition["equals"]
    if "not_equals" in condition:
        return found is not _MISSING and found != condition["not_equals"]
    if "exists" in condition:
        return (found is not _MISSING and found is not None) == bool(condition["exists"])
    return found == "ok"


def _claim(pipeline: Pipeline) -> bool:
    now = timezone.now()
    return bool(
        Pipeline.objects.filter(
            Q(claimed_until__isnull=True) | Q(claimed_until__lt=now),
            pk=pipeline.pk,
            status__in=[PipelineStatus.PENDING, PipelineStatus.RUNNING, PipelineStatus.WAITING],
        ).update(claimed_until=now + LEASE, status=PipelineStatus.RUNNING)
    )


def _call(run: Run, *, call_id: str, name: str, arguments: dict, key: str) -> dict:
    run = Run.objects.select_related("tenant", "agent", "snapshot").get(pk=run.pk)  # live: revoked, closed
    return process_batch(
        run=run,
        calls=[{"call_id": call_id, "name": name, "arguments": arguments, "idempotency_key": key}],
        path=Path.PIPELINE_STEP,
    )[0]


def advance_pipeline(*, pipeline_pk: int) -> Pipeline:
    """Run the next steps; stop at an approval, a failure (then compensate) or the end."""
    pipeline = Pipeline.objects.select_related("run__tenant", "run__agent").get(pk=pipeline_pk)
    if not _claim(pipeline):
        return pipeline
    run, steps = pipeline.run, list(pipeline.steps.all())
    receipts = {step.step_id: step.receipt for step in steps if step.receipt is not None}
    for step in steps:
        if step.status not in (StepStatus.PENDING, StepStatus.WAITING):
            continue
        if not all(holds(condition, receipts) for condition in step.preconditions):
            _save(step, status=StepStatus.SKIPPED)
            continue
        arguments = fill(unseal(step.sealed_arguments), receipts)
        result = _call(run, call_id=step.call_id, name=step.name, arguments=arguments, key=f"{run.pk}:{step.step_id}")
        receipts[step.step_id] = result
        if result["status"] == "ok":
            _save(step, status=StepStatus.SUCCEEDED, receipt=result)
        elif result["status"] == "approval_required" or result.get("error", {}).get("code") == "in_progress":
            _save(step, status=StepStatus.WAITING, receipt=result)
            return _finish(pipeline, PipelineStatus.WAITING, "")
        else:
            _save(step, status=StepStatus.FAILED, receipt=result)
            return _compensate(pipeline, steps, step, receipts)
    return _finish(pipeline, PipelineStatus.SUCCEEDED, "")


def _compensate(
    pipeline: Pipeline, steps: list[PipelineStep], failed: PipelineStep, receipts: dict[str, dict]
) -> Pipeline:
    run, clean = pipeline.run, True
    for step in steps:
        if step.position > failed.position and step.status == StepStatus.PENDING:
            _save(step, status=StepStatus.NOT_RUN)
    for step in reversed([s for s in steps if s.status == StepStatus.SUCCEEDED]):
        call = ToolCall.objects.filter(run=run, call_id=step.call_id).first()
        if step.compensation is None:
            if call is not None and call.effect in ("write", "external", "destructive"):
                _save(step, status=StepStatus.NO_INVERSE)
                reconcile.open_reconciliation(
                    call=call,
                    reason="no_inverse",
                    note=f"Pipeline {pipeline.pipeline_id} failed at {failed.step_id}; this step "
                    "has no declared compensation. Undo it by hand if needed.",
                )
                clean = False
            continue
        arguments = fill(unseal(step.compensation["sealed_arguments"]), receipts)
        result = _call(
            run,
            call_id=f"{step.call_id}:compensate",
            name=step.compensation["name"],
            arguments=arguments,
            key=f"{run.pk}:{step.step_id}:compensate",
        )
        if result["status"] == "ok":
            _save(step, status=StepStatus.COMPENSATED, compensation_receipt=result)
        else:
            _save(step, status=StepStatus.COMPENSATION_FAILED, compensation_receipt=result)
            clean = False
            if call is not None:
                reconcile.open_reconciliation(
                    call=call,
                    reason="compensation_failed",
                    note=f"The compensation {step.compensation['name']} did not succeed.",
                )
    error = (failed.receipt or {}).get("error", {}).get("message", "")
    return _finish(
        pipeline,
        PipelineStatus.COMPENSATED if clean else PipelineStatus.FAILED,
        f"step {failed.step_id} failed: {error}"[:500],
    )


def _save(step: PipelineStep, **fields: Any) -> None:
    for key, value in fields.items():
        setattr(step, key, value)
    PipelineStep.objects.filter(pk=step.pk).update(**fields)


def _finish(pipeline: Pipeline, status: str, error: str) -> Pipeline:
    final = status in (PipelineStatus.SUCCEEDED, PipelineStatus.COMPENSATED, PipelineStatus.FAILED)
    Pipeline.objects.filter(pk=pipeline.pk).update(
        status=status, error=error, claimed_until=None, finished_at=timezone.now() if final else None
    )
    if final:
        PipelineStep.objects.filter(pipeline=pipeline).update(sealed_arguments="")
    pipeline.refresh_from_db()
    return pipeline


def waiting_pipelines_ready(limit: int = 50) -> list[int]:
    """Waiting pipelines whose paused call reached an outcome (approved and run, or declined)."""
    ready = []
    for step in PipelineStep.objects.filter(
        status=StepStatus.WAITING, pipeline__status=PipelineStatus.WAITING
    ).select_related("pipeline")[:limit]:
        call = ToolCall.objects.filter(run_id=step.pipeline.run_id, call_id=step.call_id).only("status").first()
        if call is not None and call.status not in (CallStatus.AWAITING_APPROVAL, CallStatus.EXECUTING):
            ready.append(step.pipeline_id)
    return ready


def pipeline_state(pipeline: Pipeline) -> dict:
    return {
        "pipeline_id": pipeline.pipeline_id,
        "status": pipeline.status,
        "error": pipeline.error,
        "steps": [
            {
                "step_id": s.step_id,
                "name": s.name,
                "status": s.status,
                "receipt": s.receipt,
                "compensation": s.compensation["name"] if s.compensation else None,
                "compensation_receipt": s.compensation_receipt,
            }
            for s in pipeline.steps.all()
        ],
    }
