"""Serve Airlock, one command (`make run`).

- Embedded default (no REDIS_URL): one uvicorn process serves everything through airlock.asgi (the in-memory
  channel layer and eager Celery need a single process), and `run_periodic` stands in for beat.
- With REDIS_URL: the production process model (airlock/serving.py): Granian WSGI workers, the uvicorn
  stream process and the nginx front door on --host/--port, plus a Celery worker and beat. Without nginx
  installed it says so and serves everything from the one uvicorn process instead.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from airlock.serving import free_port, front_door_command, stream_command, web_command
from console.demo import DEMO_PASSWORD, PEOPLE
from lib.signing import key_id

NO_FRONT_DOOR = (
    "nginx is not installed, so there is no front door: serving everything (sync views too) from one uvicorn "
    "process instead of Granian's WSGI workers. Install it (apt-get install nginx-light) for the production "
    "process model."
)


def _exit_on_signal(signum, frame) -> None:
    raise SystemExit(0)


class Command(BaseCommand):
    help = "Start Airlock (with REDIS_URL: WSGI workers, the stream process, the front door, Celery worker and beat)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-simulate", action="store_true", help="Do not start the simulated agents.")

    def handle(self, *args, host: str, port: int, no_simulate: bool, **options):
        children: list[subprocess.Popen] = []
        # A plain SIGTERM (docker stop, kill) must still stop the children in `finally`.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        if not os.environ.get("AIRLOCK_PUBLIC_URL"):  # the children's callbacks and links point here
            os.environ["AIRLOCK_PUBLIC_URL"] = f"http://{host}:{port}"
        if settings.REDIS_URL:
            celery = [sys.executable, "-m", "celery", "-A", "console"]
            children.append(subprocess.Popen([*celery, "worker", "--loglevel", "INFO", "--concurrency", "2"]))
            children.append(
                subprocess.Popen(
                    [*celery, "beat", "--loglevel", "INFO", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")]
                )
            )
        else:
            # No beat without Redis: run the periodic tasks in a small process of our own.
            children.append(subprocess.Popen([sys.executable, str(settings.BASE_DIR / "manage.py"), "run_periodic"]))
        servers = [subprocess.Popen(command) for command in self._server_commands(host, port)]
        simulate = self._simulation_command(host, port)
        if simulate and not no_simulate:
            children.append(subprocess.Popen(simulate))
        self._banner(host, port)
        try:
            while all(server.poll() is None for server in servers):  # one server gone: stop them all
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for process in [*servers, *children]:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in [*servers, *children]:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()

    def _server_commands(self, host: str, port: int) -> list[list[str]]:
        """The embedded single process, or the production process model behind a front door on host:port."""
        embedded = [*stream_command(host, port), "--no-access-log"]
        if not settings.REDIS_URL:
            return [embedded]
        web, stream = free_port(), free_port()
        front_door = front_door_command(
            Path(tempfile.mkdtemp(prefix="airlock-front-door-")),
            listen=f"{host}:{port}",
            web=f"127.0.0.1:{web}",
            stream=f"127.0.0.1:{stream}",
        )
        if front_door is None:
            self.stderr.write(self.style.WARNING(NO_FRONT_DOOR))
            return [embedded]
        return [web_command("127.0.0.1", web), stream_command("127.0.0.1", stream), front_door]

    def _simulation_command(self, host: str, port: int) -> list[str] | None:
        from django.core.management import get_commands

        if "simulate_agents" not in get_commands():
            return None
        manage = str(settings.BASE_DIR / "manage.py")
        return [sys.executable, manage, "simulate_agents", "--base-url", f"http://{host}:{port}", "--gentle"]

    def _banner(self, host: str, port: int) -> None:
        redis_backed = "Redis-backed (WSGI workers, stream process, front door, Celery worker and beat)"
        mode = redis_backed if settings.REDIS_URL else "embedded"
        database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        base = f"http://{host}:{port}"
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Airlock is starting at {base}/  ({mode}, {database})"))
        self.stdout.write(f"Log in with any demo user below; the password is {DEMO_PASSWORD!r}:")
        for username, memberships, teams, superuser in PEOPLE:
            roles = "; ".join(f"{slug}: {', '.join(roles)}" for slug, roles in memberships.items())
            extras = [f"owns {', '.join(teams)}" if teams else "", "platform superuser" if superuser else ""]
            self.stdout.write(f"  {username:<8} {' · '.join(part for part in [roles, *extras] if part)}")
        signing = settings.AIRLOCK_SIGNING_KEY and "AIRLOCK_SIGNING_KEY" or settings.AIRLOCK_SIGNING_KEY_FILE
        self.stdout.write(f"Snapshot signing key {key_id()}: {signing}")
        self.stdout.write(f"API docs: {base}/api/docs/   health: {base}/healthz")
        self.stdout.write("")
