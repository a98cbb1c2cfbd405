"""run_periodic: the embedded stand-in for Celery beat that `make run` starts without Redis."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from console.celery import app
from console.management.commands.run_periodic import load_schedule

pytestmark = pytest.mark.django_db
CALLS: list[str] = []


@app.task(name="tests.console.record_call")
def record_call(label: str) -> None:
    CALLS.append(label)


@app.task(name="tests.console.explode")
def explode() -> None:
    raise RuntimeError("boom")


def test_the_schedule_holds_every_apps_periodic_tasks_and_they_exist():
    entries = load_schedule()
    assert entries, "no periodic tasks registered"
    for entry in entries:
        assert entry.task in app.tasks, f"{entry.name} names an unknown task {entry.task}"


def test_once_runs_every_periodic_task(monkeypatch, settings):
    settings.REDIS_URL = ""
    CALLS.clear()
    monkeypatch.setitem(
        app.conf.beat_schedule,
        "test: record",
        {
            "task": "tests.console.record_call",
            "schedule": 30.0,
            "args": ("tick",),
        },
    )
    out = StringIO()
    call_command("run_periodic", "--once", stdout=out)
    assert CALLS == ["tick"]
    assert "periodic tasks" in out.getvalue()


def test_a_failing_task_is_named(monkeypatch, settings):
    settings.REDIS_URL = ""
    app.conf.task_eager_propagates = False
    monkeypatch.setitem(app.conf.beat_schedule, "test: explode", {"task": "tests.console.explode", "schedule": 30.0})
    with pytest.raises(CommandError, match="test: explode"):
        call_command("run_periodic", "--once", stdout=StringIO())


def test_refuses_to_run_beside_real_celery(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    with pytest.raises(CommandError, match="REDIS_URL is set"):
        call_command("run_periodic", "--once")
