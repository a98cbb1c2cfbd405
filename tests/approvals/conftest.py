import sys
import types

import pytest

from runs.models import CallStatus, ToolCall


def _fake_execute_approved_call(executions: list):
    """Stand-in for runs.services.execute_approved_call while the gate is not merged: executes once
    per call (the idempotency the real one gives through the call's idempotency key)."""

    def execute_approved_call(*, call, arguments):
        call.refresh_from_db()
        if call.status == CallStatus.SUCCEEDED:
            return call.result
        executions.append(arguments)
        result = {"call_id": call.call_id, "status": "ok", "is_error": False,
                  "content": {"refund_id": f"rf_{call.pk}", "amount_cents": arguments.get("amount_cents")},
                  "skill": {"name": call.name, "version": call.skill_version.version}, "truncated": False,
                  "warnings": []}
        ToolCall.objects.filter(pk=call.pk).update(status=CallStatus.SUCCEEDED, result=result)
        return result

    return execute_approved_call


@pytest.fixture
def executions(monkeypatch) -> list:
    """Arguments of every real execution, in order."""
    executed: list = []
    fake = _fake_execute_approved_call(executed)
    try:
        import runs.services as services

        monkeypatch.setattr(services, "execute_approved_call", fake)
    except ImportError:
        module = types.ModuleType("runs.services")
        module.execute_approved_call = fake
        monkeypatch.setitem(sys.modules, "runs.services", module)
    return executed
