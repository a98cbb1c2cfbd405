"""Objects for the tenant-isolation table (tests/test_tenant_isolation.py): the client result route."""

from runs.models import ToolCall
from tests.runs.factories import run_for


def client_result_kwargs(world) -> dict:
    run = run_for(world.acme_agent)
    ToolCall.objects.create(run=run, call_id="local-1", name="workspace.read_local_notes", status="executing")
    return {"run_id": run.pk, "call_id": "local-1"}
