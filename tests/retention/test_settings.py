"""Retention periods come from the environment; an audit period shorter than the runs' is refused."""

from tests.test_settings import refusal, run_python

REPORT = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.AIRLOCK_RUN_RETENTION_DAYS, s.AIRLOCK_AUDIT_RETENTION_DAYS, s.AIRLOCK_RETENTION_BATCH_SIZE)"
)


def test_defaults_and_overrides():
    assert run_python(REPORT).stdout.split() == ["90", "365", "500"]
    assert run_python(
        REPORT, AIRLOCK_RUN_RETENTION_DAYS="0", AIRLOCK_AUDIT_RETENTION_DAYS="0", AIRLOCK_RETENTION_BATCH_SIZE="50"
    ).stdout.split() == ["0", "0", "50"]


def test_an_audit_period_shorter_than_the_runs_is_refused():
    assert "AIRLOCK_AUDIT_RETENTION_DAYS=30 must be 0" in refusal(
        AIRLOCK_RUN_RETENTION_DAYS="90", AIRLOCK_AUDIT_RETENTION_DAYS="30"
    )
    assert "not a whole number" in refusal(AIRLOCK_RUN_RETENTION_DAYS="ninety")
