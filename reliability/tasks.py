"""Celery tasks of the execution plane. Each takes an id, claims its row, and is safe to run twice."""

from __future__ import annotations

from celery import shared_task

from runs.services import settle_expired_leases


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def check_reconciliation(item_id: int) -> None:
    from reliability.reconcile import check_with_tool

    check_with_tool(item_id=item_id)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def follow_job(job_id: int) -> None:
    from reliability.jobs import check_job

    check_job(job_id=job_id)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_pipeline(pipeline_pk: int) -> None:
    from reliability.sagas import advance_pipeline

    advance_pipeline(pipeline_pk=pipeline_pk)


@shared_task(ignore_result=True)
def sweep_due_work() -> int:
    """Beat: status checks and reconciliation checks whose time has come (after a restart too)."""
    from reliability.jobs import due_jobs
    from reliability.reconcile import due_items
    from reliability.sagas import waiting_pipelines_ready

    settle_expired_leases()
    jobs, items, pipelines = due_jobs(), due_items(), waiting_pipelines_ready()
    for pipeline_pk in pipelines:
        run_pipeline.delay(pipeline_pk)
    for job_id in jobs:
        follow_job.delay(job_id)
    for item_id in items:
        check_reconciliation.delay(item_id)
    return len(jobs) + len(items) + len(pipelines)
