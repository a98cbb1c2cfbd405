"""Run the periodic tasks in the embedded mode, where there is no Celery beat or worker.

`manage.py serve` starts this beside the web server when REDIS_URL is unset, so approval
expiry, alerts and retention work in `make run` too. Each entry of the beat schedule (what
apps register with `@app.on_after_finalize.connect`) is run in this process when due. With
REDIS_URL set, run Celery beat and a worker instead.
"""

import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery.schedules import maybe_schedule
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from console.celery import app

logger = logging.getLogger(__name__)
LONGEST_SLEEP = 5.0


@dataclass
class Entry:
    name: str
    task: str
    schedule: Any
    args: tuple
    kwargs: dict
    last_run_at: datetime


def load_schedule() -> list[Entry]:
    """The beat schedule, after every app's tasks module has registered its entries."""
    app.loader.import_default_modules()
    app.finalize(auto=True)
    now = app.now()
    return [
        Entry(
            name=name,
            task=entry["task"],
            schedule=maybe_schedule(entry["schedule"], app=app),
            args=tuple(entry.get("args") or ()),
            kwargs=dict(entry.get("kwargs") or {}),
            last_run_at=now,
        )
        for name, entry in sorted(app.conf.beat_schedule.items())
    ]


def run_entry(entry: Entry) -> bool:
    result = app.tasks[entry.task].apply(args=entry.args, kwargs=entry.kwargs)
    entry.last_run_at = app.now()
    if result.failed():
        logger.error("Periodic task %s failed:\n%s", entry.name, result.traceback)
        return False
    return True


class Command(BaseCommand):
    help = "Run the periodic tasks when they are due, in this process (embedded mode, no REDIS_URL)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Run every periodic task once, then exit.")

    def handle(self, *args, once: bool, **options):
        if settings.REDIS_URL:
            raise CommandError("REDIS_URL is set: run 'celery -A console beat' and a worker instead.")
        entries = load_schedule()
        if once:
            failed = [entry.name for entry in entries if not run_entry(entry)]
            if failed:
                raise CommandError(f"Periodic tasks failed (see the log): {', '.join(failed)}")
            self.stdout.write(f"Ran {len(entries)} periodic tasks.")
            return
        self.stdout.write(f"Running {len(entries)} periodic tasks in-process: {', '.join(e.name for e in entries)}")
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C in `make run` reaches every process: no traceback
            self._loop(entries)

    def _loop(self, entries: list) -> None:
        while True:
            wait = LONGEST_SLEEP
            for entry in entries:
                is_due, next_check = entry.schedule.is_due(entry.last_run_at)
                if is_due:
                    # A long-lived process: drop connections the database may have closed meanwhile.
                    close_old_connections()
                    run_entry(entry)
                    close_old_connections()
                else:
                    wait = min(wait, next_check)
            time.sleep(max(wait, 0.1))
