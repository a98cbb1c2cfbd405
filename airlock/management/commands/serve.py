"""Serve Airlock, one command (`make run` is `serve --demo`).

Three process models, named once at the top of the output:
- embedded (no REDIS_URL): one uvicorn process serves everything through airlock.asgi (the in-memory channel
  layer and eager Celery need a single process), and `run_periodic` stands in for beat;
- production (REDIS_URL): Granian WSGI workers, the uvicorn stream process and the nginx front door on
  --host/--port (airlock/serving.py), plus a Celery worker and beat. Without nginx it refuses to start and
  says how to install it;
- --dev with REDIS_URL: one uvicorn process for every request, plus the Celery worker and beat.

The servers start first; the front door only once both answer on their own ports (so it never logs a refused
connection), the simulated agents once the front door answers. Then, last, the logins and any new agent keys.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.urls import reverse

from airlock.demo import seed_all
from airlock.serving import WEB_THREADS, WEB_WORKERS, free_port, front_door_command, stream_command, web_command
from console.demo import DEMO_PASSWORD, PEOPLE
from lib.signing import key_id

NO_FRONT_DOOR = (
    "REDIS_URL is set, so Airlock would run its production process model, whose front door is nginx, and nginx "
    "is not installed. Install it (as root: apt-get install nginx-light; `make run` does it for you when run as "
    "root), or serve every request from one process with `manage.py serve --dev`."
)
READY_SECONDS = 120


def _exit_on_signal(signum, frame) -> None:
    raise SystemExit(0)


def _answers(url: str) -> bool:
    """Whether a server of ours listens at url's address: it accepts connections once it serves (a check of
    our own children on this machine, not a request to anyone else, so no HTTP client and no egress guard)."""
    address = urlsplit(url)
    try:
        with socket.create_connection((address.hostname, address.port), timeout=5):
            return True
    except OSError:
        return False


def _start(command: list[str]) -> subprocess.Popen:
    """A child in a session of its own: Ctrl-C reaches only this command, which stops the children in order."""
    return subprocess.Popen(command, start_new_session=True)


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


class Command(BaseCommand):
    help = (
        "Start Airlock: embedded without REDIS_URL; with it, WSGI workers, the stream process, the nginx front "
        "door, Celery worker and beat (--dev: one process instead of the first three)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-simulate", action="store_true", help="Do not start the simulated agents.")
        parser.add_argument(
            "--dev", action="store_true", help="One uvicorn process for every request, even with REDIS_URL."
        )
        parser.add_argument(
            "--demo", action="store_true", help="Seed (or top up) the demo first; show its logins and new keys."
        )

    def handle(self, *args, host: str, port: int, no_simulate: bool, dev: bool, demo: bool, **options):
        production = bool(settings.REDIS_URL) and not dev
        base = f"http://{host}:{port}"
        web, stream = free_port(), free_port()
        door_workdir = Path(tempfile.mkdtemp(prefix="airlock-front-door-")) if production else None
        door = door_workdir and front_door_command(
            door_workdir,
            listen=f"{host}:{port}",
            web=f"127.0.0.1:{web}",
            stream=f"127.0.0.1:{stream}",
        )
        if door_workdir and not door:
            shutil.rmtree(door_workdir, ignore_errors=True)
            raise CommandError(NO_FRONT_DOOR)
        self.stdout.write(self.style.SUCCESS(f"Airlock at {base}/: {self._model(production)}"))
        new_keys = self._seed() if demo else {}

        signal.signal(signal.SIGTERM, _exit_on_signal)  # a plain SIGTERM must still stop the children
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("AIRLOCK_PUBLIC_URL", base)  # the children's callbacks and links point here
        if demo:
            os.environ.setdefault("LOG_LEVEL", "WARNING")  # a first look: warnings, not every task's success
        probe = reverse("console:login")  # a page every process serves; /healthz is 503 until Celery is up
        servers: list[subprocess.Popen] = []
        children: list[subprocess.Popen] = []
        background: list[subprocess.Popen] = []
        try:
            background = [_start(command) for command in self._background_commands(quiet=demo)]
            quiet = ["--log-level", "warning"] if demo else []  # uvicorn's start-up lines say what the frame says
            if production:
                servers += [_start(web_command("127.0.0.1", web))]
                servers += [_start([*stream_command("127.0.0.1", stream), *quiet])]
                self._wait_until_up([f"http://127.0.0.1:{web}{probe}", f"http://127.0.0.1:{stream}{probe}"], servers)
                servers.append(_start(door))
            else:
                servers.append(_start([*stream_command(host, port), "--no-access-log", *quiet]))
            self._wait_until_up([f"{base}{probe}"], servers)
            simulate = self._simulation_command(host, port)
            if simulate and not no_simulate:
                children.append(_start(simulate))
            self._ready(base, demo=demo, new_keys=new_keys)
            while all(server.poll() is None for server in servers):  # one server gone: stop them all
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:  # the simulated agents first (they would retry against stopped servers), the workers last
            for group in (children, servers, background):
                _stop(group)
            if door_workdir:
                shutil.rmtree(door_workdir, ignore_errors=True)  # its configuration and temp files

    def _model(self, production: bool) -> str:
        database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        if production:
            return (
                f"production process model on {database} and Redis: Granian WSGI workers ({WEB_WORKERS} × "
                f"{WEB_THREADS} threads; Granian calls {WEB_THREADS} threads high for the cores, and they are meant: "
                "each mostly waits on the database), the uvicorn stream process, the nginx front door, Celery "
                "worker and beat"
            )
        if settings.REDIS_URL:
            return f"one uvicorn process for every request (--dev) on {database} and Redis, Celery worker and beat"
        return f"embedded: one uvicorn process on {database}, tasks run inside it, no Redis"

    def _seed(self) -> dict[str, str]:
        self.stdout.write("Seeding the demo (tenants, people, agents, skills, a few runs and approvals)...")
        logging.disable(logging.INFO)  # each seeder's and each eager task's INFO line; warnings still show
        try:
            with transaction.atomic():
                return seed_all().new_keys
        finally:
            logging.disable(logging.NOTSET)

    def _background_commands(self, *, quiet: bool) -> list[list[str]]:
        if settings.REDIS_URL:
            # Quiet (the demo): no start-up banners, warnings only; LOG_LEVEL=INFO make run shows every task.
            level = os.environ["LOG_LEVEL"] if quiet else "INFO"
            celery = [sys.executable, "-m", "celery", "-A", "console", *(["--quiet"] if quiet else [])]
            schedule = str(settings.VAR_DIR / "celerybeat-schedule")
            return [
                [*celery, "worker", "--loglevel", level, "--concurrency", "2"],
                [*celery, "beat", "--loglevel", level, "--schedule", schedule],
            ]
        # No beat without Redis: run the periodic tasks in a small process of our own.
        return [[sys.executable, str(settings.BASE_DIR / "manage.py"), "run_periodic"]]

    def _wait_until_up(self, urls: list[str], servers: list[subprocess.Popen]) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while not all(_answers(url) for url in urls):
            if any(server.poll() is not None for server in servers):
                raise CommandError("A server process stopped while starting; its error is above.")
            if time.monotonic() > deadline:
                raise CommandError(f"Nothing answered at {', '.join(urls)} within {READY_SECONDS} s.")
            time.sleep(0.2)

    def _simulation_command(self, host: str, port: int) -> list[str] | None:
        from django.core.management import get_commands

        if "simulate_agents" not in get_commands():
            return None
        manage = str(settings.BASE_DIR / "manage.py")
        return [sys.executable, manage, "simulate_agents", "--base-url", f"http://{host}:{port}", "--gentle"]

    def _ready(self, base: str, *, demo: bool, new_keys: dict[str, str]) -> None:
        """Last, framed: where Airlock is, who can log in, the keys shown this once."""
        rule = "-" * 78
        write = self.stdout.write
        write(rule)
        write(self.style.SUCCESS(f"Airlock is ready at {base}/   (Ctrl-C stops every process)"))
        if demo:
            write(f"Log in as any demo user; the password is {DEMO_PASSWORD!r}:")
            for username, memberships, teams, superuser in PEOPLE:
                roles = "; ".join(f"{slug}: {', '.join(roles)}" for slug, roles in memberships.items())
                extras = [f"owns {', '.join(teams)}" if teams else "", "platform superuser" if superuser else ""]
                write(f"  {username:<8} {' · '.join(part for part in [roles, *extras] if part)}")
            if new_keys:
                write(self.style.WARNING("The demo agents' API keys, shown this once (stored only as hashes):"))
                for name, key in new_keys.items():
                    write(f"  {name:<20} {key}")
            else:
                write("The demo agents' keys were shown on the first run (make another: manage.py create_agent).")
        signing = settings.AIRLOCK_SIGNING_KEY and "AIRLOCK_SIGNING_KEY" or settings.AIRLOCK_SIGNING_KEY_FILE
        write(f"API docs: {base}/api/docs/   health: {base}/healthz   snapshot signing key {key_id()}: {signing}")
        if settings.EMAIL_BACKEND.endswith("filebased.EmailBackend"):
            write(f"E-mail (approver notices, invitations) is written to {settings.EMAIL_FILE_PATH}/, a file each.")
        write(rule)
