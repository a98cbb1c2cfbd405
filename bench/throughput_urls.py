"""The throughput benchmark's URLconf: every URL of the project, plus a bare endpoint.

`POST /api/bench/bare` is the smallest useful write a Django view of this project can do on the
same server setup: it reads the JSON body the agent would send to the gate and does exactly one ORM
INSERT, of one row into `bench_bare_row`, then answers a small JSON. It sits under /api/ so that it
passes the same middleware stack as the gate. The table is the bench's own, made by the bench's seed
with `CREATE TABLE IF NOT EXISTS` (BARE_TABLE_SQL) in its throwaway database: an existing model of the
project would carry its own indexes, constraints and foreign keys and change with the schema, and a
migration of the project's apps for a benchmark table would ship it to every deployment. The model is
therefore unmanaged (`managed = False`) and lives in the `bench` app that only bench/throughput_settings.py
installs.
"""

import json

from django.db import models
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from airlock.urls import urlpatterns as project_urlpatterns

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


@csrf_exempt  # an API endpoint with no session, like the gate's
@require_POST
def bare(request: HttpRequest) -> JsonResponse:
    calls = json.loads(request.body)["calls"]
    row = BareRow.objects.create(call_id=str(calls[0]["call_id"]))
    return JsonResponse({"results": [{"call_id": row.call_id, "status": "ok", "id": row.pk}]})


urlpatterns = [path("api/bench/bare", bare, name="bench-bare"), *project_urlpatterns]
