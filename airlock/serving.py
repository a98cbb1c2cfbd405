"""Airlock's production process model, as `manage.py serve`, the benchmarks and the tests start it:

- web: Granian serving airlock.wsgi (synchronous Django: agent API, console, approver API, OTLP ingest);
- stream: uvicorn serving airlock.asgi (the approvals websocket, a run's events long poll, /mcp);
- the front door: nginx routing one origin to the two by path (deploy/front-door.conf.template).

The Dockerfile and docker-compose.yml run the same commands (tests/test_deploy.py compares them).
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import socket
import sys
import tempfile
from pathlib import Path

FRONT_DOOR_TEMPLATE = Path(__file__).resolve().parent.parent / "deploy" / "front-door.conf.template"
WEB_WORKERS = 2  # about one per core
WEB_THREADS = 8  # per worker: requests in Django at once, each on a pooled connection while it needs one
# The TLS proxy whose X-Forwarded-Proto the front door keeps (everyone else's it replaces with its own
# scheme): one on the same host, as in front of `manage.py serve`; the image's FORWARDED_ALLOW_IPS agrees.
TLS_PROXY = "127.0.0.1"

# A whole nginx configuration around the template, writing only to workdir and its temp directory.
_NGINX_MAIN = """\
daemon off;
{user}worker_processes 1;
pid {workdir}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {temp}/client_body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
{server}
}}
"""


def web_command(host: str, port: int, *, workers: int = WEB_WORKERS, threads: int = WEB_THREADS) -> list[str]:
    return [
        *[sys.executable, "-m", "granian", "--interface", "wsgi", "--no-ws", "--host", host, "--port", str(port)],
        *["--workers", str(workers), "--blocking-threads", str(threads), "--log-level", "warning"],
        "airlock.wsgi:application",
    ]


def stream_command(host: str, port: int) -> list[str]:
    return [
        *[sys.executable, "-m", "uvicorn", "airlock.asgi:application", "--host", host, "--port", str(port)],
        *["--proxy-headers", "--lifespan", "off"],
    ]


def free_port() -> int:
    """A loopback port nothing listens on now, for a process behind the front door."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def front_door_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


def front_door_server_block(*, listen: str, web: str, stream: str, tls_proxy: str = TLS_PROXY) -> str:
    """The template's server block with its ${AIRLOCK_...} names filled in (nginx's own $names stay)."""
    values = {
        "AIRLOCK_FRONT_DOOR_LISTEN": listen,
        "AIRLOCK_WEB_UPSTREAM": web,
        "AIRLOCK_STREAM_UPSTREAM": stream,
        "AIRLOCK_TLS_PROXY": tls_proxy,
    }
    return re.sub(r"\$\{(AIRLOCK_\w+)\}", lambda m: values[m.group(1)], FRONT_DOOR_TEMPLATE.read_text())


def _worker_user_and_temp(workdir: Path) -> tuple[str, Path]:
    """Who nginx's worker runs as (its `user` line) and where it keeps bodies and responses too large for memory.

    Not root: nginx stays this user, and the temp files go under workdir. Root: the master stays root and its
    worker drops to `nobody`, which can neither write nor even reach a private (0700) workdir, so that every
    request body over 8 KB was a 500 (`client_body/... failed (13: Permission denied)`). The worker is then
    named explicitly and gets a temp directory it owns: under workdir, made passable (0711, no listing), when
    every folder above it is passable (`manage.py serve`'s, under /tmp); else under the system's temp folder.
    """
    if os.geteuid() != 0:
        return "", workdir
    nobody = pwd.getpwnam("nobody")
    if all(parent.stat().st_mode & 0o001 for parent in workdir.resolve().parents):
        workdir.chmod(0o711)
        temp = workdir / "temp"
        temp.mkdir(exist_ok=True)
    else:
        temp = Path(tempfile.mkdtemp(prefix="airlock-front-door-temp-"))
    os.chown(temp, nobody.pw_uid, nobody.pw_gid)
    return f"user {nobody.pw_name} {grp.getgrgid(nobody.pw_gid).gr_name};\n", temp


def front_door_command(workdir: Path, *, listen: str, web: str, stream: str) -> list[str] | None:
    """nginx in the foreground with a configuration written to workdir; None when nginx is not installed."""
    binary = front_door_binary()
    if binary is None:
        return None
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "nginx.conf"
    server = front_door_server_block(listen=listen, web=web, stream=stream)
    user, temp = _worker_user_and_temp(workdir)
    config.write_text(_NGINX_MAIN.format(workdir=workdir, user=user, temp=temp, server=server))
    return [binary, "-e", "stderr", "-p", str(workdir), "-c", str(config)]


__all__ = ["free_port", "front_door_command", "front_door_server_block", "stream_command", "web_command"]
