"""The run-events long poll is woken by lib.wakeups when an event is committed, from this process or
another one through Redis pub/sub; a wake-up is only a hint: a rolled-back event, a spurious or a lost
wake-up, or a wake-up on another tenant's run never puts wrong data in an agent's hands.

Bounds are generous on purpose: "woken" means well before the fallback read (wakeups.fallback_seconds(),
5 s with Redis), never a tight latency figure."""

import asyncio
import contextlib
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import pytest
import redis
from django.conf import settings
from django.db import close_old_connections, transaction
from django.urls import reverse

from lib import wakeups
from runs.events import append_event, feed_topic
from tests.approvals.factories import make_run

pytestmark = pytest.mark.django_db(transaction=True)

# Another process: load Django against the test database, say "ready", append one event when told.
APPEND_FROM_ANOTHER_PROCESS = """
import sys, django
django.setup()
from runs.events import append_event
from runs.models import Run
run = Run.objects.get(pk=sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
append_event(run=run, kind="run.status", payload={"status": "running", "reason": "another process"})
print("appended", flush=True)
"""


class RolledBack(Exception):
    pass


def _events_url(run) -> str:
    return reverse("runs_api:run_events", args=[run.pk])


def _poll(client, run, wait: float) -> tuple[list[str], float]:
    started = time.monotonic()
    body = client.get(_events_url(run), {"wait": str(wait)}).json()
    return [e["payload"]["reason"] for e in body["events"]], time.monotonic() - started


def _in_a_thread(action) -> None:
    """Run `action` on its own connection once the long poll below has done its first read."""

    def later():
        time.sleep(0.2)
        try:
            action()
        finally:
            close_old_connections()

    threading.Thread(target=later).start()


def _another_process(run, *, redis_url: str) -> subprocess.Popen:
    database = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": redis_url,
    }
    process = subprocess.Popen(
        [sys.executable, "-c", APPEND_FROM_ANOTHER_PROCESS, str(run.pk)],
        env=env,
        cwd=settings.BASE_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "ready", process.stderr.read()
    return process


def _tell_to_append(process: subprocess.Popen) -> None:
    def go():
        time.sleep(0.2)  # the long poll has done its first read and sleeps
        process.stdin.write("go\n")
        process.stdin.flush()

    threading.Thread(target=go).start()


@pytest.mark.postgres
@pytest.mark.redis
def test_an_event_committed_by_another_process_wakes_the_long_poll(agent_client, acme, agent):
    run = make_run(tenant=acme, agent=agent)
    process = _another_process(run, redis_url=settings.REDIS_URL)
    try:
        _tell_to_append(process)
        reasons, elapsed = _poll(agent_client, run, wait=30)
        assert process.stdout.readline().strip() == "appended"
    finally:
        process.kill()
        process.wait(10)
    assert reasons == ["another process"]
    assert elapsed < wakeups.FALLBACK_WITH_REDIS_S - 1  # woken, not found by the fallback read


@pytest.mark.postgres
@pytest.mark.redis
def test_a_lost_wake_up_still_delivers_the_event_by_the_fallback_read(agent_client, acme, agent):
    run = make_run(tenant=acme, agent=agent)
    process = _another_process(run, redis_url="redis://127.0.0.1:1/11")  # its publish is refused
    try:
        _tell_to_append(process)
        reasons, elapsed = _poll(agent_client, run, wait=30)
        assert process.stdout.readline().strip() == "appended"
    finally:
        process.kill()
        process.wait(10)
        errors = process.stderr.read()
    assert "could not publish a wake-up for run-events:" in errors and "Logging error" not in errors  # lost
    assert reasons == ["another process"]
    assert elapsed < wakeups.FALLBACK_WITH_REDIS_S + 5  # one fallback read later, not at the 30 s deadline


def test_a_rolled_back_event_is_never_returned_and_the_next_committed_one_is(agent_client, acme, agent):
    run = make_run(tenant=acme, agent=agent)

    def roll_back_then_commit():
        with contextlib.suppress(RolledBack), transaction.atomic():
            append_event(run=run, kind="run.status", payload={"status": "paused", "reason": "rolled back"})
            raise RolledBack
        time.sleep(0.2)
        append_event(run=run, kind="run.status", payload={"status": "running", "reason": "committed"})

    _in_a_thread(roll_back_then_commit)
    reasons, elapsed = _poll(agent_client, run, wait=30)
    assert reasons == ["committed"]
    assert elapsed < wakeups.fallback_seconds() + 3


def test_a_wake_up_without_an_event_does_not_end_the_wait_early(agent_client, acme, agent):
    run = make_run(tenant=acme, agent=agent)
    _in_a_thread(lambda: wakeups.publish(feed_topic(run.pk)))  # anyone may wake; the poll reads again
    reasons, elapsed = _poll(agent_client, run, wait=1.5)
    assert reasons == [] and elapsed >= 1.4


def test_another_tenants_agent_cannot_wait_on_my_run_nor_is_woken_by_it(
    agent_client, outsider_agent_client, acme, globex, agent
):
    mine = make_run(tenant=acme, agent=agent)
    started = time.monotonic()
    response = outsider_agent_client.get(_events_url(mine), {"wait": "30"})
    assert response.status_code == 404 and time.monotonic() - started < 2  # refused at once, no waiting

    theirs = make_run(tenant=globex, agent=globex.agents.get())
    _in_a_thread(lambda: append_event(run=mine, kind="run.status", payload={"status": "running", "reason": "mine"}))
    reasons, elapsed = _poll(outsider_agent_client, theirs, wait=1.5)
    assert reasons == [] and elapsed >= 1.4
    assert [e["payload"]["reason"] for e in agent_client.get(_events_url(mine)).json()["events"]] == ["mine"]


@pytest.mark.redis
def test_wake_ups_are_published_on_the_documented_channel_only_once_committed(acme, agent):
    run = make_run(tenant=acme, agent=agent)
    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]
    db = client.connection_pool.connection_kwargs.get("db", 0)
    with client.pubsub(ignore_subscribe_messages=True) as pubsub:
        pubsub.subscribe(f"{prefix}:{db}:wakeups")
        pubsub.get_message(timeout=1)  # the subscription's confirmation
        with contextlib.suppress(RolledBack), transaction.atomic():
            append_event(run=run, kind="run.status", payload={"status": "paused", "reason": "rolled back"})
            raise RolledBack
        assert pubsub.get_message(timeout=0.5) is None
        with transaction.atomic():
            append_event(run=run, kind="run.status", payload={"status": "running", "reason": "committed"})
            assert pubsub.get_message(timeout=0.5) is None  # not before the commit
        message = pubsub.get_message(timeout=2)
    assert message is not None and message["data"].decode() == feed_topic(run.pk)


def _listen_in_a_forked_child(topic: str, pipe) -> None:
    async def hear() -> bool:
        with wakeups.listening(topic) as waiter:
            await waiter.wait(2)  # the subscription's own wake-up ("read again, you may have missed one")
            pipe.send(os.getpid())
            return await waiter.wait(10)

    pipe.send(asyncio.run(hear()))


@pytest.mark.redis
def test_a_forked_process_hears_wake_ups_through_its_own_subscription():
    async def listen_briefly() -> None:  # this process has a subscriber thread before it forks
        with wakeups.listening("warm-up") as waiter:
            await waiter.wait(0.5)

    asyncio.run(listen_briefly())
    parent_end, child_end = multiprocessing.get_context("fork").Pipe()
    child = multiprocessing.get_context("fork").Process(target=_listen_in_a_forked_child, args=("forked", child_end))
    child.start()
    try:
        assert parent_end.poll(20), "the child did not start listening"
        child_pid = parent_end.recv()
        names = {c["name"] for c in redis.Redis.from_url(settings.REDIS_URL).client_list()}
        assert wakeups.subscriber_name(child_pid) in names and wakeups.subscriber_name(os.getpid()) in names
        deadline = time.monotonic() + 5
        while not parent_end.poll(0.2) and time.monotonic() < deadline:
            wakeups.publish("forked")  # again until heard: the child's subscription may still be starting
        assert parent_end.poll(5) and parent_end.recv() is True
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
