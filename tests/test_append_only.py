"""Every audit log refuses to change a written row or delete it through the ORM, whoever asks."""

import pytest
from django.apps import apps

from lib.append_only import AppendOnlyError, AppendOnlyModel

AUDIT_LOGS = {
    "approvals.ApprovalEvent",
    "console.AgentKeyEvent",
    "console.InvitationEvent",
    "console.MembershipEvent",
    "console.OperatorAction",
    "reliability.CredentialAudit",
}


def _logs() -> list[type[AppendOnlyModel]]:
    return [model for model in apps.get_models() if issubclass(model, AppendOnlyModel)]


def test_the_audit_logs_are_append_only_models():
    assert {model._meta.label for model in _logs()} >= AUDIT_LOGS


@pytest.mark.parametrize("model", _logs(), ids=lambda model: model._meta.label)
def test_a_written_row_cannot_be_rewritten_or_deleted(model):
    written = model(pk=1)
    with pytest.raises(AppendOnlyError, match="append-only"):
        written.save()
    with pytest.raises(AppendOnlyError, match="append-only"):
        written.delete()
