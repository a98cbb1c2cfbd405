"""Record before answer: one malformed element of a batch gets its own `validation` result, nothing of it
is written, and the calls around it behave as they would without it (issue 12).

Bodies are sent as raw JSON text, as an agent would: Python's json module (DRF's parser) reads lone
surrogate escapes ("\\ud800") and integers of any size, and PostgreSQL refuses NUL in text and jsonb.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter

import pytest
from django.core.cache import cache
from django.urls import reverse
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runs.adapters.python import register
from runs.batch_input import MAX_DEPTH
from runs.models import CallStatus, ToolCall
from tests.runs.conftest import call, start_run
from tests.runs.factories import grant, make_skill, run_for

pytestmark = pytest.mark.django_db

WRITE = "orders.write_counted"
_executions: Counter[str] = Counter()
_lock = threading.Lock()


@register("test.count_executions", effect="read")
def count_executions(*, arguments, context):
    with _lock:  # reads run on the gate's thread pool
        _executions[context.call_id] += 1
    return {"done": True}


@pytest.fixture
def counted(acme):
    """A write and a read skill whose executions are counted by call_id, granted to the agent's tenant."""
    make_skill("orders.write_counted", effect="write", adapter="python:test.count_executions", publish=False)
    make_skill("orders.read_counted", effect="read", adapter="python:test.count_executions")
    grant(acme, "orders.*")
    _executions.clear()
    yield _executions
    _executions.clear()


def post_raw(agent_client, run_id: str, calls: list):
    return agent_client.post(
        reverse("runs_api:run_calls", args=[run_id]), data=json.dumps({"calls": calls}), content_type="application/json"
    )


def nested(levels: int) -> dict:
    """An element whose innermost object sits `levels` deep, the element itself being level 1."""
    inner: dict = {}
    for _ in range(levels - 2):
        inner = {"deeper": inner}
    return call("bad", WRITE, inner)


MALFORMED = [
    ("nul in name", call("bad", WRITE + "\x00"), "name contains a NUL character"),
    ("nul in call_id", call("bad\x00", WRITE), "call_id contains a NUL character"),
    ("nul in version", call("bad", WRITE, version="1.0.0\x00"), "version contains a NUL character"),
    ("nul in idempotency_key", call("bad", WRITE, idempotency_key="k\x00"), "idempotency_key contains a NUL character"),
    ("nul in argument key", call("bad", WRITE, {"no\x00te": "x"}), "arguments has a key containing a NUL"),
    ("nul in argument value", call("bad", WRITE, {"note": "a\x00b"}), "arguments.note contains a NUL character"),
    (
        "nul deep in arguments",
        call("bad", WRITE, {"items": [{"a": 1}, {"note": "\x00"}]}),
        "arguments.items[1].note contains a NUL character",
    ),
    ("nul in a top-level key", {**call("bad", WRITE), "x\x00": 1}, "The call has a key containing a NUL"),
    (
        "lone surrogate in argument value",
        call("bad", WRITE, {"note": "\ud800"}),
        "arguments.note contains a lone UTF-16 surrogate",
    ),
    ("lone surrogate in name", call("bad", WRITE + "\udfff"), "name contains a lone UTF-16 surrogate"),
    ("lone surrogate in call_id", call("bad\udc00", WRITE), "call_id contains a lone UTF-16 surrogate"),
    (
        "lone surrogate in argument key",
        call("bad", WRITE, {"\ud83d": 1}),
        "arguments has a key containing a lone UTF-16 surrogate",
    ),
    ("integer 2**63", call("bad", WRITE, {"amount": 2**63}), "arguments.amount is an integer beyond"),
    ("integer -(2**63) - 1", call("bad", WRITE, {"amount": -(2**63) - 1}), "arguments.amount is an integer beyond"),
    (
        "integer 2**53, beyond what canonical JSON hashes",
        call("bad", WRITE, {"amount": 2**53}),
        "arguments.amount is an integer beyond",
    ),
    (f"nesting depth {MAX_DEPTH + 1}", nested(MAX_DEPTH + 1), f"is nested deeper than {MAX_DEPTH} levels"),
    ("text instead of an object", "orders.write_counted", "Each call must be an object"),
    ("number instead of an object", 42, "Each call must be an object"),
    ("null instead of an object", None, "Each call must be an object"),
    ("array instead of an object", [call("bad", WRITE)], "Each call must be an object"),
]


@pytest.mark.parametrize("malformed,message", [pytest.param(m, s, id=i) for i, m, s in MALFORMED])
def test_a_malformed_call_fails_alone_and_is_not_recorded(agent_client, counted, malformed, message):
    run = start_run(agent_client)
    calls = [call("before", WRITE, {"note": "first"}), malformed, call("after", "orders.read_counted")]
    response = post_raw(agent_client, run["run_id"], calls)
    assert response.status_code == 200, response.content
    before, bad, after = response.json()["results"]
    assert before["status"] == "ok" and after["status"] == "ok", (before, after)
    assert bad["status"] == "error" and bad["call_id"] == ""
    assert (bad["error"]["class"], bad["error"]["code"]) == ("validation", "malformed_call")
    assert message in bad["error"]["message"]
    assert counted == {"before": 1, "after": 1}
    stored = ToolCall.objects.filter(run_id=run["run_id"])
    assert sorted(stored.values_list("call_id", flat=True)) == ["after", "before"]
    assert not ToolCall.objects.filter(status=CallStatus.EXECUTING).exists()


def test_the_deepest_nesting_allowed_still_runs(agent_client, counted):
    run = start_run(agent_client)
    deepest = {**nested(MAX_DEPTH), "call_id": "deep"}
    [result] = post_raw(agent_client, run["run_id"], [deepest]).json()["results"]
    assert result["status"] == "ok", result
    assert counted == {"deep": 1}


def test_a_batch_of_only_malformed_elements_answers_each(agent_client, counted):
    run = start_run(agent_client)
    response = post_raw(agent_client, run["run_id"], [1, "x", None, call("c\x00", WRITE)])
    assert response.status_code == 200, response.content
    assert [r["error"]["code"] for r in response.json()["results"]] == ["malformed_call"] * 4
    assert not counted and not ToolCall.objects.filter(run_id=run["run_id"]).exists()


@pytest.mark.parametrize(
    "first",
    [
        pytest.param({"call_id": "dup", "name": 5}, id="name not a string"),
        pytest.param({"call_id": "dup", "name": WRITE, "arguments": 5}, id="arguments not an object"),
        pytest.param({"call_id": "dup", "name": WRITE, "version": 1}, id="version not a string"),
    ],
)
def test_a_call_id_is_taken_even_by_a_call_refused_for_its_shape(agent_client, agent, counted, first):
    """The second use of a call_id is a duplicate even when the first use failed its shape check: else both
    are recorded under one call_id, and the second runs downstream but is answered `internal`."""
    run = run_for(agent)
    response = post_raw(agent_client, str(run.pk), [first, call("dup", "orders.read_counted"), call("other", WRITE)])
    assert response.status_code == 200, response.content
    refused, again, other = response.json()["results"]
    assert refused["error"]["code"] == "malformed_call" and again["error"]["code"] == "duplicate_call_id"
    assert other["status"] == "ok" and counted == {"other": 1}
    assert dict(ToolCall.objects.filter(run=run).values_list("call_id", "status")) == {
        "dup": CallStatus.INVALID,
        "other": CallStatus.SUCCEEDED,
    }


@pytest.mark.parametrize("body", [{"calls": []}, {"calls": {}}, {"calls": "x"}, {"calls": [1] * 51}, {}])
def test_the_envelope_is_still_checked_whole(agent_client, counted, body):
    run = start_run(agent_client)
    response = agent_client.post(
        reverse("runs_api:run_calls", args=[run["run_id"]]), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["error"]["class"] == "validation"


# Any JSON beside one valid call ----------------------------------------------------------------------

_text = st.text(
    st.characters(exclude_categories=()) | st.sampled_from(["\x00", "\ud800", "\udfff", "a", "."]), max_size=10
)  # exclude_categories=() lets in the surrogates (category Cs) st.text leaves out
_scalars = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
    | st.integers()
    | st.sampled_from([2**53 - 1, 2**53, 2**63 - 1, 2**63, -(2**63) - 1])
)
_json = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=8,
)
_plain_id = st.text("abc-123", min_size=1, max_size=4)  # so that some elements get past the shape check
_call_like = st.fixed_dictionaries(
    {
        "call_id": _plain_id | _text,
        "name": st.sampled_from([WRITE, "orders.read_counted", "orders.unknown"]) | _text,
        "arguments": st.dictionaries(_plain_id, _plain_id | st.integers(-9, 9), max_size=2)
        | st.dictionaries(_plain_id | _text, _json, max_size=3)
        | _json,
    },
    optional={"version": st.sampled_from(["1.0.0", "2.0.0"]) | _text | _json, "idempotency_key": _plain_id | _json},
)
_elements = st.lists(_json | _call_like, min_size=1, max_size=4)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(others=_elements, position=st.integers(min_value=0, max_value=5), effect=st.sampled_from(["write", "read"]))
def test_any_json_beside_a_valid_call(agent_client, agent, counted, others, position, effect):
    cache.clear()  # the agent's rate limit counts every example's calls
    valid_id = f"valid-{uuid.uuid4().hex}"
    name = WRITE if effect == "write" else "orders.read_counted"
    calls = [*others]
    calls.insert(min(position, len(calls)), call(valid_id, name, {"note": "the valid one"}))
    run = run_for(agent)
    response = post_raw(agent_client, str(run.pk), calls)
    assert response.status_code < 500, response.content
    results = response.json()["results"]
    assert len(results) == len(calls)
    for result in results:  # events: what the examples reached (pytest --hypothesis-show-statistics)
        event(result["error"]["code"] if result["status"] == "error" else result["status"])
        assert result.get("error", {}).get("class") != "internal", (calls, result)  # the gate failed closed
    [valid] = [r for r in results if r["call_id"] == valid_id]
    assert valid["status"] == "ok", valid
    assert counted[valid_id] == 1
    assert not ToolCall.objects.filter(status=CallStatus.EXECUTING).exists()


def test_a_body_nested_past_the_recursion_limit_is_a_400(agent_client):
    run = start_run(agent_client)
    body = '{"calls": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = agent_client.post(
        reverse("runs_api:run_calls", args=[run["run_id"]]), data=body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "nested too deeply" in response.content.decode()
