"""Builders for the tenant-isolation table (tests/test_tenant_isolation.py): objects in acme."""

from lib.sealing import seal
from reliability.models import Pipeline, PipelineStep, ReconciliationItem
from reliability.services import save_credential
from runs.models import CallStatus, ToolCall
from tests.runs.factories import run_for


def item_kwargs(world) -> dict:
    run = run_for(world.acme_agent)
    call = ToolCall.objects.create(
        run=run, call_id="c1", name="billing.refund", effect="write", status=CallStatus.TIMEOUT_UNKNOWN
    )
    item = ReconciliationItem.objects.create(
        tenant=world.acme, run=run, call=call, skill_name="billing.refund", reason="timeout"
    )
    return {"item_id": item.pk}


def credential_kwargs(world) -> dict:
    credential = save_credential(tenant=world.acme, name="zendesk_token", value="v")
    return {"tenant_slug": world.acme.slug, "credential_id": credential.pk}


def binding_kwargs(world) -> dict:
    from reliability.services import bind_credential

    save_credential(tenant=world.acme, name="zendesk_token", value="v")
    binding = bind_credential(
        tenant=world.acme,
        credential_name="zendesk_token",
        skill_pattern="helpdesk.*",
        endpoint="https://helpdesk.example",
        user=None,
    )
    return {"tenant_slug": world.acme.slug, "binding_id": binding.pk}


def run_kwargs(world) -> dict:
    return {"run_id": run_for(world.acme_agent).pk}


def pipeline_kwargs(world) -> dict:
    run = run_for(world.acme_agent)
    pipeline = Pipeline.objects.create(run=run, tenant=world.acme, pipeline_id="p1")
    PipelineStep.objects.create(
        pipeline=pipeline, step_id="s1", position=0, name="orders.get_order", sealed_arguments=seal({})
    )
    return {"run_id": run.pk, "pipeline_id": "p1"}
