"""The bare endpoint: the smallest useful write a Django view can do. It reads the JSON body an agent would
send to the gate, does exactly one ORM INSERT (bench/models.py) and answers a small JSON. The same view is
served by the project (bench/throughput_urls.py, behind every middleware of the project) and by the minimal
app (bench/minimal_settings.py, no middleware), so that the two differ only in what surrounds the view."""

import json

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from bench.common import BARE_PATH
from bench.models import BareRow

__all__ = ["BARE_PATH", "bare"]


@csrf_exempt  # an API endpoint with no session, like the gate's
@require_POST
def bare(request: HttpRequest) -> JsonResponse:
    calls = json.loads(request.body)["calls"]
    row = BareRow.objects.create(call_id=str(calls[0]["call_id"]))
    return JsonResponse({"results": [{"call_id": row.call_id, "status": "ok", "id": row.pk}]})
