"""The load run, short: 20 agents for 10 s through a live deployment (the production process model, a
Celery worker, PostgreSQL, Redis), then the books. The long run is `make load` (docs/performance.md)."""

import pytest
from django.conf import settings

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def test_twenty_agents_for_ten_seconds_balance_the_books(monkeypatch):
    from bench import load

    database = settings.DATABASES["default"]
    monkeypatch.setenv(
        "AIRLOCK_LOAD_DATABASE_URL",
        f"postgres://{database['USER']}@{database['HOST']}:{database['PORT'] or 5432}/{database['NAME']}_load",
    )
    monkeypatch.setenv("AIRLOCK_LOAD_REDIS_URL", settings.REDIS_URL)
    try:
        result = load.load(20, 10, log=lambda line: None)
    finally:
        load.drop_database()
    load.report(result)
    assert result.stats.runs >= 20 and result.books["counts"]["approvals"] >= 5
    assert not result.books["problems"], result.books["problems"]
    assert not result.stats.errors, result.stats.errors[:5]
    assert result.stats.late == 0
