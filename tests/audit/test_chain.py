"""Each tenant's audit rows are chained by hash at insert; verify_audit names a row edited or deleted."""

import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import close_old_connections, connection
from django.utils import timezone

from approvals.models import ApprovalEvent
from approvals.retention import purge_expired_audit
from audit import chain
from audit.models import AuditCheckpoint, AuditLink
from console.models import OperatorAction


def _action(tenant, target: str = "run-1", reason: str = "runaway loop") -> OperatorAction:
    return OperatorAction.objects.create(
        tenant=tenant, action="run_stopped", target=target, reason=reason, actor_label="alice", detail={"n": 1}
    )


def _verify() -> str:

    out = StringIO()
    try:
        call_command("verify_audit", stdout=out)
    except CommandError:
        return "FAILED\n" + out.getvalue()
    return out.getvalue()


@pytest.mark.django_db
def test_each_tenant_has_its_own_chain(acme, globex):
    first, second, other = _action(acme), _action(acme, "run-2"), _action(globex)
    links = {link.row_ref: link for link in AuditLink.objects.filter(log="console.OperatorAction")}
    assert (links[first.pk].seq, links[second.pk].seq, links[other.pk].seq) == (1, 2, 1)
    assert links[first.pk].prev_sha256 == chain.GENESIS
    assert links[second.pk].prev_sha256 == links[first.pk].sha256
    assert links[other.pk].tenant_ref == globex.pk
    report = _verify()
    assert "OK" in report and "FAIL" not in report


@pytest.mark.django_db
def test_checkpoints_sign_each_head_once(acme, globex):
    _action(acme), _action(globex)
    assert chain.write_checkpoints() == 2
    assert chain.write_checkpoints() == 0
    _action(acme)
    assert chain.write_checkpoints() == 1
    assert AuditCheckpoint.objects.filter(tenant_ref=acme.pk).order_by("-seq").first().seq == 2
    assert "FAIL" not in _verify()


@pytest.mark.django_db
def test_a_forged_checkpoint_or_a_truncated_chain_is_named(acme):
    _action(acme), _action(acme, "run-2")
    chain.write_checkpoints()
    _as_attacker("UPDATE audit_auditcheckpoint SET sha256 = %s", ["f" * 64])
    assert "checkpoint of link #2" in _verify() and "bad signature" in _verify()


@pytest.mark.django_db
def test_retention_redaction_and_purge_keep_the_chain_checkable(acme, settings):
    settings.AIRLOCK_AUDIT_RETENTION_DAYS = 1
    event = ApprovalEvent.objects.create(
        tenant=acme, actor_label="bob", action="approved", detail={"reason": "secret words", "via": "console"}
    )
    _action(acme)
    old = timezone.now() - timedelta(days=3)
    ApprovalEvent.retention_queryset().filter(pk=event.pk).update(
        detail={"reason": "[redacted]", "via": "console"}, redacted_at=old, detached_at=old
    )
    assert "FAIL" not in _verify()
    assert purge_expired_audit(batch_size=10, max_batches=2)[1] == 1
    assert AuditLink.objects.get(log="approvals.ApprovalEvent", row_ref=event.pk).removed_at is not None
    report = _verify()
    assert "FAIL" not in report and "1 tombstones" in report


@pytest.mark.django_db
def test_an_unredacted_detail_changed_through_the_orm_is_named(acme):
    event = ApprovalEvent.objects.create(tenant=acme, actor_label="bob", action="approved", detail={"via": "console"})
    ApprovalEvent.retention_queryset().filter(pk=event.pk).update(detail={"via": "slack"})
    assert f"approvals.ApprovalEvent row {event.pk} (link #1) was edited" in _verify()


@pytest.mark.django_db
def test_rows_from_before_the_chain_are_linked_once_on_upgrade(acme):
    row = _action(acme)
    _as_attacker("DELETE FROM audit_auditlink", [])
    assert f"console.OperatorAction row {row.pk} is in no chain" in _verify()
    call_command("verify_audit", "--link-unlinked", stdout=StringIO())
    assert "FAIL" not in _verify()


# An attacker with database access: raw SQL, with triggers switched off --------------------------------


def _as_attacker(sql: str, params: list) -> None:
    """Raw SQL past the application; on PostgreSQL with the append-only triggers off, as a superuser can."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = replica")
        cursor.execute(sql, params)
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = DEFAULT")


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_chain_tables_refuse_changes_while_their_triggers_are_on(acme):
    from django.db import DatabaseError, transaction

    _action(acme)
    chain.write_checkpoints()
    for sql in (
        "UPDATE audit_auditlink SET content_sha256 = 'x'",
        "DELETE FROM audit_auditlink",
        "UPDATE audit_auditcheckpoint SET sha256 = 'x'",
        "DELETE FROM audit_auditcheckpoint",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql)
    AuditLink.objects.update(removed_at=timezone.now())  # a tombstone, once
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditLink.objects.update(removed_at=timezone.now())


@pytest.mark.postgres
@pytest.mark.django_db
def test_verify_audit_names_a_row_edited_and_a_row_deleted_by_hand(acme, globex):
    rows = [_action(acme, f"run-{n}") for n in range(4)]
    _action(globex)
    chain.write_checkpoints()
    assert "FAIL" not in _verify()

    _as_attacker("UPDATE console_operatoraction SET reason = %s WHERE id = %s", ["nothing to see", rows[1].pk])
    report = _verify()
    assert f"FAIL tenant {acme.pk}: console.OperatorAction row {rows[1].pk} (link #2) was edited" in report
    assert f"OK   tenant {globex.pk}" in report

    _as_attacker("DELETE FROM console_operatoraction WHERE id = %s", [rows[2].pk])
    assert f"console.OperatorAction row {rows[2].pk} (link #3) was deleted" in _verify()

    # Deleting the link too breaks the chain; deleting the last links falls short of the checkpoint.
    _as_attacker("DELETE FROM audit_auditlink WHERE log = %s AND row_ref = %s", ["console.OperatorAction", rows[2].pk])
    assert "links #3 to #3 were deleted from the chain" in _verify()
    _as_attacker("DELETE FROM audit_auditlink WHERE tenant_ref = %s AND seq >= 3", [acme.pk])
    _as_attacker("DELETE FROM console_operatoraction WHERE id = %s", [rows[3].pk])
    assert "checkpoint of link #4" in _verify() and "links were deleted from its end" in _verify()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_inserts_racing_for_one_tenant_never_fork_its_chain(acme):
    start = threading.Barrier(8)
    errors = []

    def write(n: int) -> None:
        try:
            start.wait(timeout=30)
            for i in range(5):
                _action(acme, f"run-{n}-{i}")
        except Exception as exc:  # noqa: BLE001  reported below
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    seqs = list(AuditLink.objects.filter(tenant_ref=acme.pk).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 41))
    assert "FAIL" not in _verify()


def test_only_the_audit_logs_lose_fast_deletes():
    from django.db.models.signals import post_delete

    from runs.models import ToolCall

    assert post_delete.has_listeners(OperatorAction) and not post_delete.has_listeners(ToolCall)
