"""The throughput bench (bench/throughput.py) counts only what the database recorded: a wrk run whose
answers were not all 200s, whose calls did not all succeed, or that was answered more often than
anything was written (a replay, a cached answer), fails instead of printing a figure."""

import shutil

import pytest
from django.conf import settings

from bench import throughput

CLEAN = {"requests": 10, "non_200": 0, "socket_errors": 0}


def test_answers_without_a_recorded_call_fail_the_figure():
    with pytest.raises(RuntimeError, match="10 answered requests but 7 recorded"):
        throughput.check_recorded("gate", CLEAN, 7)


def test_error_answers_and_unsucceeded_calls_fail_the_figure():
    with pytest.raises(RuntimeError, match="3 non-200"):
        throughput.check_recorded("gate", {**CLEAN, "non_200": 3}, 10)
    with pytest.raises(RuntimeError, match="socket errors"):
        throughput.check_recorded("gate", {**CLEAN, "socket_errors": 1}, 10)
    with pytest.raises(RuntimeError, match="not succeeded"):
        throughput.check_recorded("gate", CLEAN, 10, {"denied": 2})


def test_calls_still_in_flight_when_wrk_stops_are_allowed_one_per_connection():
    throughput.check_recorded("gate", CLEAN, 10 + throughput.CONNECTIONS)
    with pytest.raises(RuntimeError):
        throughput.check_recorded("gate", CLEAN, 11 + throughput.CONNECTIONS)


@pytest.mark.postgres
@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (apt-get install wrk)")
def test_every_call_wrk_sends_is_a_new_call_that_succeeds(tmp_path):
    database = settings.DATABASES["default"]
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT'] or 5432}/{database['NAME']}_throughput"
    env, pairs = throughput.prepare(tmp_path, agents=4, database_url=url)
    try:
        with throughput.serving(env, tmp_path, workers=1) as base:
            runs = {
                "bare": throughput.run_wrk("wrk", base, throughput.bare_targets(pairs), "bare", 1, tmp_path),
                "gate": throughput.run_wrk("wrk", base, throughput.gate_targets(pairs), "gate", 1, tmp_path),
            }
        throughput.verify(runs, env)
    finally:
        throughput.drop_database(url)
    assert runs["gate"]["requests"] > 0 and runs["bare"]["requests"] > 0
