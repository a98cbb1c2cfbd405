"""An attacker guessing a console password: after the limit, even the right password is refused for a while."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import SESSION_KEY
from django.test import Client
from django.urls import reverse

from tests.test_settings import refusal, run_python

pytestmark = pytest.mark.django_db


def _attempt(client: Client, username: str, password: str, addr: str = "203.0.113.5"):
    return client.post(reverse("console:login"), {"username": username, "password": password}, REMOTE_ADDR=addr)


def test_forty_wrong_passwords_lock_the_accounts_login(approver, settings):
    attacker = Client()
    statuses = [_attempt(attacker, "approver", f"guess-{i}").status_code for i in range(40)]
    assert statuses[0] == 200 and 429 in statuses  # the form again, until the lock
    assert statuses.index(429) == settings.AXES_FAILURE_LIMIT - 1

    locked = _attempt(attacker, "approver", "pw")  # the right password, too late
    assert locked.status_code == 429
    assert SESSION_KEY not in attacker.session
    page = locked.content.decode()
    assert "Too many failed logins" in page and f"locked for {settings.AIRLOCK_LOGIN_LOCKOUT_MINUTES} minutes" in page
    assert int(locked["Retry-After"]) == settings.AIRLOCK_LOGIN_LOCKOUT_MINUTES * 60

    # The account, not just the attacker's address: its owner elsewhere waits too.
    owner = Client()
    assert _attempt(owner, "approver", "pw", addr="198.51.100.20").status_code == 429
    assert SESSION_KEY not in owner.session


def test_the_lock_ends_after_the_cool_off(approver, settings):
    attacker = Client()
    for i in range(settings.AXES_FAILURE_LIMIT):
        _attempt(attacker, "approver", f"guess-{i}")
    assert _attempt(Client(), "approver", "pw", addr="198.51.100.20").status_code == 429
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.first().attempt_time
        - timedelta(minutes=settings.AIRLOCK_LOGIN_LOCKOUT_MINUTES + 1)
    )
    owner = Client()
    assert _attempt(owner, "approver", "pw", addr="198.51.100.20").status_code == 302
    assert owner.session[SESSION_KEY] == str(approver.pk)


def test_a_few_typos_then_the_right_password_log_in_and_reset_the_count(approver, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _attempt(client, "approver", "typo").status_code == 200
    assert _attempt(client, "approver", "pw").status_code == 302
    assert not AccessAttempt.objects.filter(username="approver", failures_since_start__gt=0).exists()


def test_spraying_many_accounts_from_one_address_locks_that_address(approver, second_approver, viewer, settings):
    attacker = Client()
    names = ["approver", "approver2", "viewer"]
    for i in range(settings.AXES_FAILURE_LIMIT):
        _attempt(attacker, names[i % 3], f"guess-{i}")
    assert _attempt(attacker, "viewer", "pw").status_code == 429


def test_the_limits_come_from_the_environment():
    shown = run_python(
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.AXES_FAILURE_LIMIT, int(s.AXES_COOLOFF_TIME.total_seconds()), "
        "s.AIRLOCK_TOKEN_MAX_DAYS, s.AIRLOCK_BAD_KEYS_PER_MINUTE)",
        AIRLOCK_LOGIN_FAILURE_LIMIT="3",
        AIRLOCK_LOGIN_LOCKOUT_MINUTES="2",
        AIRLOCK_TOKEN_MAX_DAYS="60",
        AIRLOCK_BAD_KEYS_PER_MINUTE="5",
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split()[-4:] == ["3", "120", "60", "5"]
    assert "AIRLOCK_LOGIN_FAILURE_LIMIT" in refusal(AIRLOCK_LOGIN_FAILURE_LIMIT="0")
    assert "AIRLOCK_TOKEN_DEFAULT_DAYS" in refusal(AIRLOCK_TOKEN_DEFAULT_DAYS="400")
