"""Celery tasks of the execution plane. Each takes an id, claims its row, and is safe to run twice."""

from __future__ import annotations

from celery import shared_task

from reliability import jobs, reconcile, sagas
from runs.services import settle_expired_leases


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def check_reconciliation(item_id: int) -> None:
    reconcile.check_with_tool(item_id=item_id)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def follow_job(job_id: int) -> None:
    jobs.check_job(job_id=job_id)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_pipeline(pipeline_pk: int) -> None:
    sagas.advance_pipeline(pipeline_pk=pipeline_pk)


@shared_task(ignore_result=True)
def sweep_due_work() -> int:
    """Beat: status checks and reconciliation checks whose time has come (after a restart too)."""
    settle_expired_leases()
    job_ids, item_ids, pipeline_pks = jobs.due_jobs(), reconcile.due_items(), sagas.waiting_pipelines_ready()
    for pipeline_pk in pipeline_pks:
        run_pipeline.delay(pipeline_pk)
    for job_id in job_ids:
        follow_job.delay(job_id)
    for item_id in item_ids:
        check_reconciliation.delay(item_id)
    return len(job_ids) + len(item_ids) + len(pipeline_pks)
