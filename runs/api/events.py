"""`GET /api/v1/runs/{run_id}/events?after=<id>&wait=<seconds>`: the run's event feed, by long poll.

An async view: a waiting agent costs one coroutine, not a worker thread or a database connection. It
reads the feed, then sleeps until the run's next event is committed (a wake-up from lib.wakeups,
published by runs.events.append_event) and reads again; a lost wake-up only delays it to the next
fallback read (wakeups.fallback_seconds()).
"""

import math
import re

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import HttpRequest, JsonResponse
from rest_framework import exceptions

from console.api_auth import AgentKeyAuthentication, TooManyBadKeys
from console.api_errors import error_body
from console.models import Agent
from lib import clock, wakeups
from runs.events import events_after, feed_topic
from runs.models import Run

MAX_WAIT_SECONDS = 30.0
MAX_EVENT_ID = 2**63 - 1  # event ids are PostgreSQL bigints
_SECONDS = re.compile(r"(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)  # 12, 0.5, .5, 1e3


def _error(status: int, error_class: str, code: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(error_class, code, message), status=status)


def _authenticate(request: HttpRequest) -> Agent | JsonResponse:
    try:
        result = AgentKeyAuthentication().authenticate(request)
    except TooManyBadKeys as exc:  # this address or key lookup sent too many wrong keys: back off
        response = JsonResponse(
            error_body("rate_limited", "too_many_bad_keys", str(exc.detail), retry_after=exc.wait), status=429
        )
        response["Retry-After"] = str(exc.wait)
        return response
    except exceptions.AuthenticationFailed as exc:
        codes = exc.get_codes()
        return _error(401, "authentication", codes if isinstance(codes, str) else "invalid_key", str(exc.detail))
    if result is None:
        return _error(
            401, "authentication", "missing_key", "Send the agent's API key as 'Authorization: Bearer <key>'."
        )
    if not isinstance(result[1], Agent):
        return _error(403, "authorization", "agents_only", "Only an agent key may follow a run's events.")
    return result[1]


def _releasing_connection(read):
    """Run one read, then give the connection back, so a waiting agent holds no connection (or pool
    slot) while it sleeps: 200 waiting agents would otherwise need 200 PostgreSQL connections."""

    def released(*args, **kwargs):
        try:
            return read(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:  # a test's transaction, not a request's connection
                connection.close()

    return released


@_releasing_connection
def _open(request: HttpRequest, run_id) -> tuple[Run, int, float] | JsonResponse:
    """The agent's key, the parameters, then the agent's own run: one trip to a worker thread."""
    agent = _authenticate(request)
    if isinstance(agent, JsonResponse):
        return agent
    parsed = _parse(request)
    if isinstance(parsed, JsonResponse):
        return parsed
    run = Run.objects.of_agent(agent).filter(pk=run_id).only("pk").first()
    if run is None:
        return _error(404, "not_found", "not_found", "No such run.")
    return run, *parsed


@_releasing_connection
def _read(*, run_id, after: int) -> tuple[list[dict], str | None]:
    """The events after the cursor, and the run's status as of this read."""
    events = events_after(run_id=run_id, after=after)
    return events, Run.objects.filter(pk=run_id).values_list("status", flat=True).first()


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:39] + "…")


def _parse_after(text: str) -> int | JsonResponse:
    """An event id: digits only (no sign, no spaces, no decimal point), within PostgreSQL's bigint."""
    if not text:
        return 0
    if text.isascii() and text.isdigit() and len(text) <= 19 and int(text) <= MAX_EVENT_ID:
        return int(text)
    return _error(
        400,
        "validation",
        "invalid_after",
        f"'after' must be the id of an event (a whole number from 0, as in next_cursor); got {_shown(text)}.",
    )


def _parse_wait(text: str) -> float | JsonResponse:
    """Seconds to wait for an event: a finite number from 0; more than MAX_WAIT_SECONDS waits that long."""
    if not text:
        return 0.0
    # Plain decimal notation only: float() would also take "nan" (min(nan, 30) is nan: a wait that never
    # ends), "inf", "-1", "1_0", " 1" and non-ASCII digits.
    wait = float(text) if len(text) <= 40 and _SECONDS.fullmatch(text) else math.nan
    if not math.isfinite(wait):  # too large a number is infinite
        return _error(
            400,
            "validation",
            "invalid_wait",
            f"'wait' must be a number of seconds from 0 to {MAX_WAIT_SECONDS:g} (more is read as "
            f"{MAX_WAIT_SECONDS:g}); got {_shown(text)}.",
        )
    return min(wait, MAX_WAIT_SECONDS)


def _parse(request: HttpRequest) -> tuple[int, float] | JsonResponse:
    after = _parse_after(request.GET.get("after", ""))
    if isinstance(after, JsonResponse):
        return after
    wait = _parse_wait(request.GET.get("wait", ""))
    if isinstance(wait, JsonResponse):
        return wait
    return after, wait


async def run_events(request: HttpRequest, run_id) -> JsonResponse:
    if request.method != "GET":
        return _error(405, "validation", "method_not_allowed", f"Method {request.method} not allowed.")
    opened = await sync_to_async(_open)(request, run_id)
    if isinstance(opened, JsonResponse):
        return opened
    run, after, wait = opened
    deadline = clock.monotonic() + wait
    with wakeups.listening(feed_topic(run.pk)) as waiter:  # before the first read: no event falls between
        while True:
            events, status = await sync_to_async(_read)(run_id=run.pk, after=after)
            remaining = deadline - clock.monotonic()
            if events or remaining <= 0:
                break
            await waiter.wait(min(remaining, wakeups.fallback_seconds()))
    return JsonResponse({"events": events, "next_cursor": events[-1]["id"] if events else after, "run_status": status})
