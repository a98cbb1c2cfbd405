"""What queueing and running a task costs in connections: a real Celery worker (prefork, Redis broker,
PostgreSQL through the default psycopg pool) keeps its database connection from one task to the next, as a
web worker does from one request to the next, and the threads that queue tasks share one result backend.

Celery's Django fixup closes every connection and the whole pool around each task (celery#10554), so
each task of the worker used to open a new pool and a new PostgreSQL connection; console/celery.py and
CELERY_DB_REUSE_MAX keep the pool. PostgreSQL's own count of sessions opened on the database is the
witness."""

import os
import threading
import time

import pytest
from django.db import connection

from approvals.tasks import expire_approvals
from console.celery import app as celery_app
from tests.celery_worker import start_worker, stop_worker, wait_for, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TASKS = 20
WORKER_APPLICATION = f"airlock-test-worker-{os.getpid()}"


def _sessions_opened() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


@pytest.fixture
def worker(tmp_path):
    log = tmp_path / "worker.log"
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()
    # PGAPPNAME is libpq's: it names the worker's sessions in pg_stat_activity
    process = start_worker(
        f"connections{os.getpid()}", log, worker_env(PGAPPNAME=WORKER_APPLICATION), "--pool=prefork", "--concurrency=1"
    )
    try:
        yield log
    finally:
        celery_app.conf.task_always_eager = True
        stop_worker(process)


def test_a_worker_does_not_open_a_database_connection_for_every_task(worker):
    expire_approvals.delay()  # the child's first task opens its pool and connection
    wait_for(lambda: "succeeded" in worker.read_text(), 30, "the first task")
    before = _sessions_opened()
    for _ in range(TASKS):
        expire_approvals.delay()
    wait_for(lambda: worker.read_text().count("succeeded") >= TASKS + 1, 60, f"{TASKS} more tasks")
    deadline = time.monotonic() + 1.5  # backends report their statistics within a second
    while (opened := _sessions_opened() - before) <= 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert opened <= 2, f"{TASKS} tasks opened {opened} PostgreSQL sessions (counting this test's own)"


def test_a_connection_postgresql_dropped_between_tasks_is_replaced_not_failed(worker):
    expire_approvals.delay()
    wait_for(lambda: "succeeded" in worker.read_text(), 30, "the first task")
    with connection.cursor() as cursor:  # as a PostgreSQL restart or an idle-session timeout would
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            [WORKER_APPLICATION],
        )
        assert cursor.fetchone()[0] >= 1  # the worker's pooled connection
    for _ in range(3):
        expire_approvals.delay()
    wait_for(lambda: worker.read_text().count("succeeded") >= 4, 30, "three more tasks")
    assert "OperationalError" not in worker.read_text()
    assert " raised unexpected" not in worker.read_text()


def test_request_threads_share_one_result_backend_instead_of_building_one_each():
    """Celery builds its result backend on a thread's first `.delay()`; per thread, a burst of requests on
    fresh threads each paid for a new backend and Redis connection pool."""
    first = celery_app.backend
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(celery_app.backend)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(backend is first for backend in seen)
