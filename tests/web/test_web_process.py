"""The web worker's request handling (airlock/web_process.py), as a slow request and a busy worker meet it:
one request stuck in its sync code holds up no other, request threads are reused instead of started per
request, requests take turns (a few at a time) without a slow one stalling the worker, and the collector no
longer walks what the process imported."""

import asyncio
import gc
import threading
import time

import pytest
from asgiref.testing import ApplicationCommunicator
from django.http import HttpResponse
from django.urls import path

from airlock.web_process import YOUNG_GENERATION_THRESHOLD, PooledThreadsASGIHandler, Turns, tune_garbage_collection
from lib import admission

release_slow = threading.Event()


def slow(request):
    release_slow.wait(timeout=5)
    return HttpResponse("slow")


def where(request):
    return HttpResponse(str(threading.get_ident()))


def aside(request):
    """A view that, like the gate waiting on a slow downstream, steps aside before it waits."""
    admission.step_aside()
    release_slow.wait(timeout=5)
    return HttpResponse("aside")


def boom(request):
    raise RuntimeError("the view failed")


def server_error(request):
    return HttpResponse("failed", status=500)


urlpatterns = [path("slow", slow), path("where", where), path("aside", aside), path("boom", boom)]
handler500 = server_error


@pytest.fixture
def handler(settings):
    settings.ROOT_URLCONF = __name__
    settings.ALLOWED_HOSTS = ["*"]
    release_slow.clear()
    yield PooledThreadsASGIHandler()
    release_slow.set()


PATIENCE_S = 0.3


@pytest.fixture
def one_at_a_time(settings):
    """A worker that lets one request at a time into its Django code, as the default does."""
    settings.ROOT_URLCONF = __name__
    settings.ALLOWED_HOSTS = ["*"]
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    release_slow.clear()
    yield PooledThreadsASGIHandler(Turns(1, PATIENCE_S))
    release_slow.set()


def scope(path_: str) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path_,
        "raw_path": path_.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }


async def started(handler, path_: str) -> ApplicationCommunicator:
    communicator = ApplicationCommunicator(handler, scope(path_))
    await communicator.send_input({"type": "http.request", "body": b""})
    return communicator


async def answer(communicator: ApplicationCommunicator) -> tuple[int, bytes]:
    start = await communicator.receive_output(timeout=3)
    body = await communicator.receive_output(timeout=3)
    return start["status"], body["body"]


async def test_a_request_stuck_in_its_sync_code_does_not_hold_up_another(handler):
    stuck = await started(handler, "/slow")
    await asyncio.sleep(0.05)  # the slow view is now blocked on its own thread
    status, body = await answer(await started(handler, "/where"))
    assert status == 200 and body
    assert await stuck.receive_nothing(timeout=0.05)  # still waiting, and did not stop the other
    release_slow.set()
    assert await answer(stuck) == (200, b"slow")


async def test_requests_reuse_threads_instead_of_starting_one_each(handler):
    idents = [(await answer(await started(handler, "/where")))[1] for _ in range(3)]
    threads_before = threading.active_count()
    idents += [(await answer(await started(handler, "/where")))[1] for _ in range(20)]
    assert len(set(idents)) == 1  # one after another: the same borrowed thread each time
    assert threading.active_count() == threads_before
    assert idents[0] != str(threading.get_ident()).encode()  # and not the event loop's


def test_the_collector_leaves_what_was_loaded_at_start_alone():
    threshold = gc.get_threshold()
    try:
        tune_garbage_collection()
        assert gc.get_freeze_count() > 10_000  # the project's modules, classes and settings
        assert gc.get_threshold()[0] == YOUNG_GENERATION_THRESHOLD
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


async def timed_answer(handler, path_: str) -> tuple[float, int]:
    started_at = time.monotonic()
    status, _ = await answer(await started(handler, path_))
    return time.monotonic() - started_at, status


async def test_a_request_waiting_on_a_downstream_gives_its_turn_to_the_next(one_at_a_time):
    waiting = await started(one_at_a_time, "/aside")
    await asyncio.sleep(0.05)  # it has its turn, stepped aside and now waits
    took, status = await timed_answer(one_at_a_time, "/where")
    assert status == 200 and took < PATIENCE_S / 2  # in at once, not after the patience
    release_slow.set()
    assert await answer(waiting) == (200, b"aside")


async def test_a_request_that_holds_its_turn_stalls_the_next_for_the_patience_at_most(one_at_a_time):
    """As a request blocked on a row lock would: it never steps aside, and the worker still serves."""
    stuck = await started(one_at_a_time, "/slow")
    await asyncio.sleep(0.05)
    took, status = await timed_answer(one_at_a_time, "/where")
    assert status == 200 and PATIENCE_S * 0.9 <= took < PATIENCE_S + 1.0
    assert await stuck.receive_nothing(timeout=0.05)
    release_slow.set()
    assert await answer(stuck) == (200, b"slow")


async def test_a_failed_request_gives_its_turn_back(one_at_a_time):
    assert (await answer(await started(one_at_a_time, "/boom")))[0] == 500
    for _ in range(3):  # each would wait the whole patience if a turn had been lost
        took, status = await timed_answer(one_at_a_time, "/where")
        assert status == 200 and took < PATIENCE_S / 2


async def test_turns_are_taken_in_the_order_requests_came():
    turns = Turns(1, 5)
    first = await turns.take()
    order = []

    async def queued(label):
        give_back = await turns.take()
        order.append(label)
        give_back()

    waiting = [asyncio.create_task(queued(n)) for n in range(5)]
    await asyncio.sleep(0.01)
    assert order == []  # all wait for the turn the first holds
    first()
    first()  # giving a turn back twice frees one turn, not two
    await asyncio.gather(*waiting)
    assert order == [0, 1, 2, 3, 4]
    held = await turns.take()  # the one free turn
    next_in_line = asyncio.create_task(turns.take())
    await asyncio.sleep(0.05)
    assert not next_in_line.done()  # a second free turn would have let it in
    held()
    (await next_in_line)()


async def test_no_limit_lets_every_request_in_at_once(settings):
    settings.ROOT_URLCONF = __name__
    settings.ALLOWED_HOSTS = ["*"]
    release_slow.clear()
    handler = PooledThreadsASGIHandler(Turns(0, PATIENCE_S))
    stuck = await started(handler, "/slow")
    await asyncio.sleep(0.05)
    took, status = await timed_answer(handler, "/where")
    assert status == 200 and took < PATIENCE_S / 2
    release_slow.set()
    assert await answer(stuck) == (200, b"slow")


def http_scope(path_: str, query: bytes, key: str) -> dict:
    return {
        **scope(path_),
        "query_string": query,
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode())],
    }


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_an_agent_waiting_on_its_runs_events_does_not_hold_up_the_worker(settings, agent_and_key):
    """The real app, one request at a time and a patience longer than the test: a long poll steps aside
    while it waits, so another request is served at once, and the poll still ends when it should."""
    from asgiref.sync import sync_to_async
    from rest_framework.test import APIClient

    from tests.runs.conftest import start_run

    settings.ALLOWED_HOSTS = ["*"]
    _, key = agent_and_key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    run_id = (await sync_to_async(start_run)(client))["run_id"]
    handler = PooledThreadsASGIHandler(Turns(1, 30))
    poll = ApplicationCommunicator(handler, http_scope(f"/api/v1/runs/{run_id}/events", b"wait=2", key))
    await poll.send_input({"type": "http.request", "body": b""})
    started_at = time.monotonic()
    other = ApplicationCommunicator(handler, http_scope(f"/api/v1/runs/{run_id}", b"", key))
    await other.send_input({"type": "http.request", "body": b""})  # queued behind the poll's first read
    status, _ = await answer(other)
    assert status == 200 and time.monotonic() - started_at < 1.0  # not after the poll's 2 s, nor the patience
    assert await poll.receive_nothing(timeout=0.05)  # the poll is still waiting for the run's next event
    start = await poll.receive_output(timeout=5)
    assert start["status"] == 200
