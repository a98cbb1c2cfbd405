"""Long-running skills: a job id instead of a result, followed to the end, delivered once, never restarted."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from reliability.jobs import check_job
from reliability.models import JobStatus, LongJob
from reliability.tasks import sweep_due_work
from runs.models import CallStatus, RunEvent, ToolCall
from tests.reliability.conftest import gate, publish, skill

pytestmark = pytest.mark.django_db
EXPORT = {"call_id": "c1", "name": "reports.export", "arguments": {"month": "2026-11"}}


@pytest.fixture
def export(world, flaky, settings):
    settings.AIRLOCK_JOB_FIRST_CHECK_SECONDS = settings.AIRLOCK_JOB_CHECK_BASE_SECONDS = 0
    settings.AIRLOCK_JOB_MAX_CHECKS = 3
    skill(
        "reports.export",
        f"{flaky.url}/export",
        effect="write",
        output_schema={"type": "object", "required": ["rows"]},
        job_status=f"{flaky.url}/jobs/{{job_id}}",
    )
    publish()
    flaky.default("/export", ("status", 202, {}, {"job_id": "job-42", "status": "running"}))
    return flaky


def test_job_is_followed_to_the_end_and_the_result_delivered_once(world, export):
    run, results = gate(world["agent"], [EXPORT])
    assert results[0]["status"] == "ok" and results[0]["content"]["job"] == {"id": "job-42", "status": "running"}
    job = LongJob.objects.get(run=run)
    assert job.job_id == "job-42" and job.status == JobStatus.RUNNING
    assert export.keys["/export"] == [f"{run.pk}:c1"]

    export.plan("/jobs/job-42", {"status": "running"}, {"status": "succeeded", "result": {"rows": 3}})
    assert check_job(job_id=job.pk).status == JobStatus.RUNNING
    assert check_job(job_id=job.pk).status == JobStatus.SUCCEEDED
    call = ToolCall.objects.get(run=run, call_id="c1")
    assert call.status == CallStatus.SUCCEEDED and call.result["content"] == {"rows": 3}
    event = RunEvent.objects.get(run=run, kind="call.completed")
    assert event.payload["result"]["content"] == {"rows": 3}

    check_job(job_id=job.pk)  # a late duplicate task: nothing more happens
    assert export.hits["/jobs/job-42"] == 2 and RunEvent.objects.filter(kind="call.completed").count() == 1
    _, again = gate(world["agent"], [EXPORT], run=run)  # the agent repeats the call
    assert again[0]["content"] == {"rows": 3}
    assert export.hits["/export"] == 1


def test_restart_follows_the_job_again_but_never_starts_it_twice(world, export):
    run, _ = gate(world["agent"], [EXPORT])
    job = LongJob.objects.get(run=run)
    # A worker claimed the job and died: while its lease holds, nobody else follows it.
    LongJob.objects.filter(pk=job.pk).update(claimed_until=timezone.now() + timedelta(seconds=30))
    check_job(job_id=job.pk)
    assert export.hits["/jobs/job-42"] == 0
    # After the lease, the beat sweep (a restarted deployment) picks the job up again.
    LongJob.objects.filter(pk=job.pk).update(
        claimed_until=timezone.now() - timedelta(seconds=1), next_check_at=timezone.now() - timedelta(seconds=1)
    )
    export.default("/jobs/job-42", {"status": "succeeded", "result": {"rows": 1}})
    assert sweep_due_work() >= 1
    assert LongJob.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    assert export.hits["/export"] == 1


def test_job_that_never_ends_is_given_up_and_reconciled(world, export):
    run, _ = gate(world["agent"], [EXPORT])
    export.default("/jobs/job-42", {"status": "running"})
    job = LongJob.objects.get(run=run)
    for _ in range(3):
        job = check_job(job_id=job.pk)
    assert job.status == JobStatus.GAVE_UP
    assert run.reconciliation_items.get().reason == "timeout"


def test_callback_completes_the_job_and_a_bad_result_shape_is_withheld(world, export):
    run, _ = gate(world["agent"], [EXPORT])
    assert export.keys["/export"]
    job = LongJob.objects.get(run=run)
    url = reverse("reliability_api:job_complete", args=[job.callback_token])
    client = APIClient()
    assert (
        client.post(
            reverse("reliability_api:job_complete", args=["forged"]), {"status": "succeeded"}, format="json"
        ).status_code
        == 404
    )
    response = client.post(url, {"status": "succeeded", "result": {"unexpected": True}}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "succeeded"
    call = ToolCall.objects.get(run=run, call_id="c1")
    assert call.result["error"]["code"] == "contract_violation"


def test_the_tool_is_told_where_to_call_back(world, export, flaky, settings):
    seen = {}
    flaky.default(
        "/export",
        lambda handler: (seen.update(cb=handler.headers.get("X-Airlock-Callback")) or 202, {"job_id": "job-7"}),
    )
    settings.AIRLOCK_PUBLIC_URL = "https://airlock.example.com/gate"
    run, _ = gate(world["agent"], [EXPORT])
    job = LongJob.objects.get(run=run)
    # Absolute, under AIRLOCK_PUBLIC_URL (path prefix kept): the tool is elsewhere and cannot resolve a path.
    assert seen["cb"] == "https://airlock.example.com/gate" + reverse(
        "reliability_api:job_complete", args=[job.callback_token]
    )
