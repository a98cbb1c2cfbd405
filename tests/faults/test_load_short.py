"""The load run, short: 20 agents for 10 s through a live deployment (the production process model, a
Celery worker, PostgreSQL, Redis), after one agent alone for a few seconds, then the books. The long run
is `make load` (docs/performance.md)."""

import pytest
from django.conf import settings

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def test_twenty_agents_for_ten_seconds_balance_the_books_and_are_held_to_one_agent_alone(monkeypatch, capsys):
    from bench import load

    database = settings.DATABASES["default"]
    monkeypatch.setenv(
        "AIRLOCK_LOAD_DATABASE_URL",
        f"postgres://{database['USER']}@{database['HOST']}:{database['PORT'] or 5432}/{database['NAME']}_load",
    )
    monkeypatch.setenv("AIRLOCK_LOAD_REDIS_URL", settings.REDIS_URL)
    try:
        result = load.load(20, 10, log=lambda line: None, baseline_s=3)
    finally:
        load.drop_database()
    load.report(result)
    assert result.stats.runs >= 20 and result.books["counts"]["approvals"] >= 5
    assert not result.books["problems"], result.books["problems"]
    assert not result.stats.errors, result.stats.errors[:5]
    assert result.stats.late == 0

    # The one agent ran first, its calls are in the books, and every decision it waited for is its own
    # figure: none leaks into the fleet's (a baseline padded with the fleet's slow samples would hide a slowdown).
    alone = result.alone
    assert alone.runs >= 1 and alone.latencies["POST /runs/{id}/calls"] and alone.late == 0
    assert alone.decision_to_result_ms() and len(alone.decision_to_result_ms()) == len(alone.decision_sent)
    assert not set(alone.decision_sent) & set(result.stats.decision_sent)
    assert not set(alone.result_seen) & set(result.stats.result_seen)
    assert result.books["counts"]["runs"] >= result.stats.runs + alone.runs

    printed = capsys.readouterr().out.splitlines()
    for held in result.held():  # its row: one agent's p50 and p99, the fleet's, both ratios with a verdict
        assert held.alone_p50 > 0 and held.p50 > 0
        [row] = [line for line in printed if line.startswith(held.path) and ("PASS" in line or "FAIL" in line)]
        assert row.count("PASS") + row.count("FAIL") == 2, row
    names = {figure.name for figure in result.figures}
    assert "one agent alone: POST /runs/{id}/calls p50" in names
    assert "decision → agent has the result p50, against one agent" in names
