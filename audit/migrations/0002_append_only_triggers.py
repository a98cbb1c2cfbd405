"""On PostgreSQL the chain's own tables refuse changes: a link may only be marked a tombstone once (`removed_at`),
never otherwise changed or deleted; a checkpoint never changes. An attacker with database access can still switch
triggers off (`session_replication_role = replica`, `ALTER TABLE ... DISABLE TRIGGER`): verify_audit is what
notices then. SQLite (the embedded, single-machine mode) has no such triggers."""

from django.db import migrations

FUNCTIONS = """
CREATE OR REPLACE FUNCTION airlock_audit_link_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR OLD.removed_at IS NOT NULL
       OR (to_jsonb(NEW) - 'removed_at') IS DISTINCT FROM (to_jsonb(OLD) - 'removed_at') THEN
        RAISE EXCEPTION 'The audit chain is append-only: a link may only be marked removed, once.';
    END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION airlock_audit_checkpoint_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'Audit checkpoints are append-only.';
END $$;
"""
TRIGGERS = """
CREATE TRIGGER audit_auditlink_append_only BEFORE UPDATE OR DELETE ON audit_auditlink
    FOR EACH ROW EXECUTE FUNCTION airlock_audit_link_append_only();
CREATE TRIGGER audit_auditcheckpoint_append_only BEFORE UPDATE OR DELETE ON audit_auditcheckpoint
    FOR EACH ROW EXECUTE FUNCTION airlock_audit_checkpoint_append_only();
"""
DROP = """
DROP TRIGGER IF EXISTS audit_auditlink_append_only ON audit_auditlink;
DROP TRIGGER IF EXISTS audit_auditcheckpoint_append_only ON audit_auditcheckpoint;
DROP FUNCTION IF EXISTS airlock_audit_link_append_only();
DROP FUNCTION IF EXISTS airlock_audit_checkpoint_append_only();
"""


def create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTIONS)
        schema_editor.execute(TRIGGERS)


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [migrations.RunPython(create_triggers, drop_triggers)]
