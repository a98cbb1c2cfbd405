"""A hostile downstream answers with NUL characters, which PostgreSQL cannot store in JSON: the call still gets
its result (each NUL replaced by U+FFFD), recorded whole, instead of failing inside the gate."""

import pytest

from runs.adapters.python import register
from runs.models import ToolCall
from tests.reliability.conftest import gate
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db


@register("hostile.nul_answer", effect="read")
def nul_answer(*, arguments, context):
    return {"text": "before\x00after", "rows": ["a\x00"], "key\x00": 1}


def test_a_result_with_nul_characters_is_given_and_recorded(acme, agent):
    make_skill("hostile.nul_answer", adapter="python:hostile.nul_answer")
    grant(acme, "hostile.*")
    run, [result] = gate(agent, [{"call_id": "c1", "name": "hostile.nul_answer", "arguments": {}}])
    assert result["status"] == "ok", result
    assert result["content"] == {"text": "before\ufffdafter", "rows": ["a\ufffd"], "key\ufffd": 1}
    recorded = ToolCall.objects.get(run=run, call_id="c1")
    assert recorded.status == "succeeded" and recorded.result["content"]["text"] == "before\ufffdafter"
