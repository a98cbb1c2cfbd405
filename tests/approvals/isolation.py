"""Builders for the approvals rows of tests/test_tenant_isolation.py."""

from tests.approvals.factories import open_request


def approval_kwargs(world) -> dict:
    return {"approval_id": open_request(tenant=world.acme, agent=world.acme_agent).pk}


def run_kwargs(world) -> dict:
    return {"run_id": open_request(tenant=world.acme, agent=world.acme_agent).call.run_id}
