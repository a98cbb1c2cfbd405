"""A call that waits on a slow downstream gives its web worker's turn to the next request (lib.admission,
airlock/web_process.py); a call whose tool answers at once keeps it, and neither changes the outcome."""

import threading
import time

import pytest

from lib import admission
from runs import execution
from runs.adapters import InvocationContext
from runs.adapters.python import register

pytestmark = pytest.mark.django_db


@register("test.turns_at_once", effect="read")
def at_once(*, arguments, context):
    return {"n": arguments["n"]}


@register("test.turns_slow", effect="read")
def slow(*, arguments, context):
    time.sleep(0.2)
    return {"n": arguments["n"]}


def _manifest(adapter: str, timeout_ms: int = 2000) -> dict:
    return {
        "name": "orders.turns",
        "version": "1.0.0",
        "risk": {"effect": "read"},
        "execution": {"adapter": f"python:{adapter}", "timeout_ms": timeout_ms},
    }


def _context() -> InvocationContext:
    return InvocationContext(run_id="r", call_id="c", tenant="acme", agent_role="support", end_user="u")


class Turn:
    def __init__(self) -> None:
        self.given_back = threading.Event()

    def __call__(self) -> None:
        self.given_back.set()


@pytest.mark.parametrize("how", ["alone", "concurrently"])
def test_a_slow_downstream_gives_the_turn_away_and_still_answers(how):
    turn = Turn()
    manifest = _manifest("test.turns_slow")
    with admission.turn(turn):
        if how == "alone":
            outcome = execution.execute(manifest=manifest, effect="read", arguments={"n": 1}, context=_context())
        else:
            [outcome] = execution.execute_concurrently([(manifest, "read", {"n": 1}, _context())])
    assert turn.given_back.is_set()
    assert outcome.error is None and outcome.content == {"n": 1}


def test_a_tool_that_answers_at_once_keeps_the_turn():
    turn = Turn()
    with admission.turn(turn):
        outcome = execution.execute(
            manifest=_manifest("test.turns_at_once"), effect="read", arguments={"n": 2}, context=_context()
        )
    assert not turn.given_back.is_set()
    assert outcome.content == {"n": 2}


def test_the_timeout_still_holds_after_stepping_aside():
    turn = Turn()
    with admission.turn(turn):
        outcome = execution.execute(
            manifest=_manifest("test.turns_slow", timeout_ms=50), effect="read", arguments={"n": 3}, context=_context()
        )
    assert turn.given_back.is_set()
    assert outcome.error is not None and outcome.error.code == "timeout"


def test_outside_a_web_worker_stepping_aside_does_nothing():
    admission.step_aside()  # no turn in this context: no error, nothing to give back
