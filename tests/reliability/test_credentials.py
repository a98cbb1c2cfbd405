"""Tenant credentials: sealed at rest, attached at execution only, never seen by agent, trace or logs."""

import io
import logging

import pytest
from django.core.management import call_command

from reliability.services import save_credential
from tests.reliability.conftest import bind, gate, publish, skill

pytestmark = pytest.mark.django_db
SECRET = "zd-very-secret-token-4242"


@pytest.fixture
def helpdesk(world, flaky):
    skill("helpdesk.get_ticket", f"{flaky.url}/ticket", credential="zendesk_token")
    publish()
    flaky.default("/ticket", {"ticket": 7, "status": "open"})
    return flaky


def test_credential_is_attached_at_execution_and_seen_nowhere_else(world, helpdesk, caplog):
    caplog.set_level(logging.DEBUG)
    save_credential(tenant=world["acme"], name="zendesk_token", value=SECRET)
    bind(world["acme"], "zendesk_token", "helpdesk.get_ticket", helpdesk.url)
    run, results = gate(world["agent"], [{"call_id": "c1", "name": "helpdesk.get_ticket", "arguments": {}}])
    assert results[0]["status"] == "ok"
    assert helpdesk.auth == [f"Bearer {SECRET}"]
    assert SECRET not in str(results)
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    assert "zendesk_token" in dump.getvalue()  # the reference is there ...
    assert SECRET not in dump.getvalue()  # ... the value is not, in any table (calls, spans, events, credentials)
    assert SECRET not in caplog.text


def test_end_user_credential_wins_over_the_tenant_default(world, helpdesk):
    save_credential(tenant=world["acme"], name="zendesk_token", value="tenant-wide")
    save_credential(tenant=world["acme"], name="zendesk_token", value="ada-only", end_user="u-1")
    bind(world["acme"], "zendesk_token", "helpdesk.*", helpdesk.url)
    gate(world["agent"], [{"call_id": "c1", "name": "helpdesk.get_ticket", "arguments": {}}])
    assert helpdesk.auth == ["Bearer ada-only"]


def test_a_tenant_without_the_credential_gets_a_clear_error_and_nothing_is_sent(world, helpdesk, globex):
    save_credential(tenant=globex, name="zendesk_token", value="globex-value")
    _, results = gate(world["agent"], [{"call_id": "c1", "name": "helpdesk.get_ticket", "arguments": {}}])
    assert results[0]["error"]["code"] == "credential_missing"
    assert helpdesk.hits["/ticket"] == 0


def test_rotation_replaces_the_value(world, helpdesk):
    save_credential(tenant=world["acme"], name="zendesk_token", value="old")
    bind(world["acme"], "zendesk_token", "helpdesk.get_ticket", helpdesk.url)
    credential = save_credential(tenant=world["acme"], name="zendesk_token", value="new")
    assert credential.rotated_at is not None
    gate(world["agent"], [{"call_id": "c1", "name": "helpdesk.get_ticket", "arguments": {}}])
    assert helpdesk.auth == ["Bearer new"]
