"""The database bumps console_gategeneration on every change the gate's in-process caches depend on.

Triggers rather than code in each service: a grant revoked from the admin, a queryset update, a
restore or a test flush all invalidate the caches the same way. PostgreSQL fires once per statement,
SQLite once per row. Every bump draws a fresh random epoch, so a bump that was rolled back (and the
cache entries a process made inside that transaction) is never mistaken for a later, committed one; the
upsert recreates the row after a flush."""

from django.db import migrations

WATCHED = {
    "policies_grant": "INSERT OR UPDATE OR DELETE",
    "policies_policy": "INSERT OR UPDATE OR DELETE",
    "policies_policyversion": "INSERT OR UPDATE OR DELETE",
    "registry_skillversion": "INSERT OR UPDATE OF status OR DELETE",
}

POSTGRES_BUMP = """
CREATE OR REPLACE FUNCTION airlock_bump_gate_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO console_gategeneration (id, epoch, number) VALUES (1, gen_random_uuid()::text, 1)
    ON CONFLICT (id) DO UPDATE SET number = console_gategeneration.number + 1, epoch = gen_random_uuid()::text;
    RETURN NULL;
END $$;
"""

SQLITE_BUMP = (
    "INSERT INTO console_gategeneration (id, epoch, number) VALUES (1, lower(hex(randomblob(16))), 1) "
    "ON CONFLICT (id) DO UPDATE SET number = number + 1, epoch = lower(hex(randomblob(16)));"
)


def create_triggers(apps, schema_editor):
    execute = schema_editor.execute
    if schema_editor.connection.vendor == "postgresql":
        execute(POSTGRES_BUMP)
        for table, events in WATCHED.items():
            execute(
                f"CREATE TRIGGER {table}_bumps_gate AFTER {events} ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION airlock_bump_gate_generation()"
            )
            execute(
                f"CREATE TRIGGER {table}_truncate_bumps_gate AFTER TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION airlock_bump_gate_generation()"
            )
        execute("INSERT INTO console_gategeneration (id, epoch, number) VALUES (1, gen_random_uuid()::text, 1)")
    elif schema_editor.connection.vendor == "sqlite":
        for table, events in WATCHED.items():
            for event in events.split(" OR "):
                name = f"{table}_{event.split()[0].lower()}_bumps_gate"
                execute(f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN {SQLITE_BUMP} END")
        execute("INSERT INTO console_gategeneration (id, epoch, number) VALUES (1, lower(hex(randomblob(16))), 1)")
    else:
        raise NotImplementedError(f"No gate-generation triggers for {schema_editor.connection.vendor}.")


def drop_triggers(apps, schema_editor):
    for table in WATCHED:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_bumps_gate ON {table}")
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_truncate_bumps_gate ON {table}")
        else:
            for event in ("insert", "update", "delete"):
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_{event}_bumps_gate")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS airlock_bump_gate_generation()")


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0004_gategeneration"),
        ("registry", "0004_search_vector"),
        ("policies", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_triggers, drop_triggers)]
