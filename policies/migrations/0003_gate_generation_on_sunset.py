"""A skill version's sunset bumps the gate generation too: the live check before every execution reads a
version's status and sunset from the gate cache (runs/gate_cache.py version_standing)."""

from importlib import import_module

from django.db import migrations

TABLE = "registry_skillversion"
SQLITE_BUMP = import_module("policies.migrations.0002_gate_generation_triggers").SQLITE_BUMP


def _recreate(schema_editor, columns: str) -> None:
    execute = schema_editor.execute
    if schema_editor.connection.vendor == "postgresql":
        execute(f"DROP TRIGGER IF EXISTS {TABLE}_bumps_gate ON {TABLE}")
        execute(
            f"CREATE TRIGGER {TABLE}_bumps_gate AFTER INSERT OR UPDATE OF {columns} OR DELETE ON {TABLE} "
            "FOR EACH STATEMENT EXECUTE FUNCTION airlock_bump_gate_generation()"
        )
    elif schema_editor.connection.vendor == "sqlite":
        execute(f"DROP TRIGGER IF EXISTS {TABLE}_update_bumps_gate")
        execute(f"CREATE TRIGGER {TABLE}_update_bumps_gate AFTER UPDATE OF {columns} ON {TABLE} BEGIN {SQLITE_BUMP} END")
    else:
        raise NotImplementedError(f"No gate-generation triggers for {schema_editor.connection.vendor}.")


def watch_sunset(apps, schema_editor):
    _recreate(schema_editor, "status, sunset_at")


def watch_status_only(apps, schema_editor):
    _recreate(schema_editor, "status")


class Migration(migrations.Migration):
    dependencies = [("policies", "0002_gate_generation_triggers")]

    operations = [migrations.RunPython(watch_sunset, watch_status_only)]
