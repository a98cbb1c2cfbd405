"""The web worker's request handling (airlock/web_process.py), as a slow request and a busy worker meet it:
one request stuck in its sync code holds up no other, request threads are reused instead of started per
request, and the collector no longer walks what the process imported."""

import asyncio
import gc
import threading

import pytest
from asgiref.testing import ApplicationCommunicator
from django.http import HttpResponse
from django.urls import path

from airlock.web_process import YOUNG_GENERATION_THRESHOLD, PooledThreadsASGIHandler, tune_garbage_collection

release_slow = threading.Event()


def slow(request):
    release_slow.wait(timeout=5)
    return HttpResponse("slow")


def where(request):
    return HttpResponse(str(threading.get_ident()))


urlpatterns = [path("slow", slow), path("where", where)]


@pytest.fixture
def handler(settings):
    settings.ROOT_URLCONF = __name__
    settings.ALLOWED_HOSTS = ["*"]
    release_slow.clear()
    yield PooledThreadsASGIHandler()
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
