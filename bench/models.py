"""The bare endpoint's table (bench/bare.py), for the throughput bench only.

The table is the bench's own, made by the bench's seed with `CREATE TABLE IF NOT EXISTS` (BARE_TABLE_SQL) in
its throwaway database: an existing model of the project would carry its own indexes, constraints and
foreign keys and change with the schema, and a migration of the project's apps for a benchmark table would
ship it to every deployment. The model is therefore unmanaged and lives in the `bench` app, which only the
bench's settings (throughput_settings, minimal_settings) install.
"""

from django.db import models
from django.utils import timezone

BARE_TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS bench_bare_row "
    "(id bigserial PRIMARY KEY, call_id varchar(100) NOT NULL, created_at timestamptz NOT NULL)"
)


class BareRow(models.Model):
    """One row per request to the bare endpoint; `call_id` lets the bench count what was written."""

    call_id = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "bench"
        managed = False
        db_table = "bench_bare_row"
