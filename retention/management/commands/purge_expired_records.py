"""Run retention by hand: `manage.py purge_expired_records [--dry-run]` (see docs/operations.md)."""

from django.conf import settings
from django.core.management.base import BaseCommand

from retention.services import DEFAULT_MAX_BATCHES, RetentionReport, count_expired, purge_expired_records

LABELS = [
    ("runs", "runs"),
    ("calls", "tool calls"),
    ("events", "run events"),
    ("approvals", "approval requests"),
    ("idempotency_records", "idempotency records"),
    ("deliveries", "webhook deliveries"),
    ("audit_redacted", "audit rows redacted"),
    ("audit_deleted", "audit rows deleted"),
]


class Command(BaseCommand):
    help = (
        "Delete closed runs past AIRLOCK_RUN_RETENTION_DAYS with all they own, keep their audit rows "
        "redacted, and delete audit rows past AIRLOCK_AUDIT_RETENTION_DAYS."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Count what would go; delete nothing.")
        parser.add_argument(
            "--batch-size", type=int, default=None, help="Rows per delete (default AIRLOCK_RETENTION_BATCH_SIZE)."
        )
        parser.add_argument(
            "--max-batches", type=int, default=DEFAULT_MAX_BATCHES, help="Deletes per pass before stopping."
        )
        parser.add_argument("--until-done", action="store_true", help="Repeat passes until nothing is left.")

    def handle(self, *args, dry_run: bool, batch_size: int | None, max_batches: int, until_done: bool, **options):
        self.stdout.write(
            f"Run retention: {_days(settings.AIRLOCK_RUN_RETENTION_DAYS)}; "
            f"audit retention: {_days(settings.AIRLOCK_AUDIT_RETENTION_DAYS)}."
        )
        if dry_run:
            self._write("Would delete or redact", count_expired())
            return
        total = purge_expired_records(batch_size=batch_size, max_batches=max_batches)
        while until_done and not total.finished:
            more = purge_expired_records(batch_size=batch_size, max_batches=max_batches)
            if not any(getattr(more, key) for key, _ in LABELS):
                break  # no progress: stop rather than spin
            total = RetentionReport(
                **{key: getattr(total, key) + getattr(more, key) for key, _ in LABELS},
                batches=total.batches + more.batches,
                finished=more.finished,
            )
        self._write("Deleted or redacted", total)
        if not total.finished:
            self.stdout.write("More remains: run again, or pass --until-done.")

    def _write(self, heading: str, report: RetentionReport) -> None:
        self.stdout.write(f"{heading}:")
        for key, label in LABELS:
            self.stdout.write(f"  {label}: {getattr(report, key)}")


def _days(days: int) -> str:
    return f"{days} days" if days else "off (kept forever)"
