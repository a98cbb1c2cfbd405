"""X-Forwarded-For, attacked through each server of the process model, started with the image's own
command and environment: the WSGI workers (Granian, the image's command), the stream process (uvicorn,
docker-compose.yml's command), and the two behind the nginx front door (airlock/serving.py).

The login lock by address and the key-guessing limit count by the client's address. A client that names
a new address in X-Forwarded-For on every request must not get a fresh count each time; only the proxy's
connections (FORWARDED_ALLOW_IPS) may name the client. The attacker connects from 127.0.0.2, another
host as far as the server can tell; the image trusts 127.0.0.1, where the test plays the proxy (and where
the front door connects from).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.urls import reverse

from airlock.forwarded import TrustedProxies
from airlock.serving import front_door_binary, front_door_command
from bench.common import free_port
from tests.envscan import ROOT, clean_environ
from tests.shipped import image_command, image_env
from tests.test_deploy import SERVICES

FAILURE_LIMIT = 5
BAD_KEYS_PER_MINUTE = 5
PROXY = "127.0.0.1"
ATTACKER = "127.0.0.2"


@dataclass
class Server:
    url: str


def _environment(workdir, database: str = "airlock.sqlite3") -> dict[str, str]:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    shipped = {name: value for name, value in image_env().items() if name not in {"AIRLOCK_VAR_DIR", "STATIC_ROOT"}}
    return clean_environ(
        os.environ,
        **shipped,
        DJANGO_SETTINGS_MODULE="console.settings",
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1",
        AIRLOCK_PUBLIC_URL="http://127.0.0.1",
        AIRLOCK_SIGNING_KEY=pem.decode(),
        DATABASE_URL=f"sqlite:///{workdir / database}",
        AIRLOCK_VAR_DIR=str(workdir),
        STATIC_ROOT=str(workdir / "static"),
        SECURE_SSL_REDIRECT="0",  # plain HTTP on loopback: the proxy would terminate TLS
        SESSION_COOKIE_SECURE="0",
        CSRF_COOKIE_SECURE="0",
        AIRLOCK_LOGIN_FAILURE_LIMIT=str(FAILURE_LIMIT),
        AIRLOCK_BAD_KEYS_PER_MINUTE=str(BAD_KEYS_PER_MINUTE),
        LOG_LEVEL="WARNING",
    )


def _as_shipped(command: list[str], port: int) -> list[str]:
    """A shipped command (the image's, or a compose service's), on a loopback port of this machine."""
    command = list(command)
    command[command.index("--host") + 1] = "127.0.0.1"
    command[command.index("--port") + 1] = str(port)
    return [sys.executable, "-m", *command]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("forwarded-for")
    manage = [sys.executable, str(ROOT / "manage.py")]
    for step in (["collectstatic", "--noinput"], ["migrate", "--noinput"]):  # as the image and compose do
        done = subprocess.run([*manage, *step], cwd=ROOT, env=_environment(workdir), capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode()
    return workdir


def _commands(model: str, port: int, workdir) -> list[list[str]]:
    web, stream = image_command(), SERVICES["stream"]["command"]
    assert web[0] == "granian" and stream[0] == "uvicorn"
    if model == "web":
        return [_as_shipped(web, port)]
    if model == "stream":
        return [_as_shipped(stream, port)]
    web_port, stream_port = free_port(), free_port()
    door = front_door_command(
        workdir / "front-door",
        listen=f"127.0.0.1:{port}",
        web=f"127.0.0.1:{web_port}",
        stream=f"127.0.0.1:{stream_port}",
    )
    return [_as_shipped(web, web_port), _as_shipped(stream, stream_port), door]


@pytest.fixture(scope="module", params=["web", "stream", "front door"])
def server(request, workdir) -> Iterator[Server]:
    if request.param == "front door" and front_door_binary() is None:
        pytest.skip("needs nginx (apt-get install nginx-light)")
    # Each server its own copy of the migrated database: the login lock of one must not carry over.
    database = f"{request.param.replace(' ', '-')}.sqlite3"
    shutil.copyfile(workdir / "airlock.sqlite3", workdir / database)
    env = _environment(workdir, database)
    port = free_port()
    log_path = workdir / f"{request.param}.log"
    log = log_path.open("w")
    processes = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        for command in _commands(request.param, port, workdir)
    ]
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            alive = all(process.poll() is None for process in processes)
            assert alive and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        yield Server(url=url)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        log.close()


def _client(server: Server, source: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, transport=httpx.HTTPTransport(local_address=source), timeout=30)


def _failed_logins(server: Server, source: str, forwarded_for: list[str]) -> list[int]:
    """One wrong password per forwarded address, each for a different username (so no account locks)."""
    with _client(server, source) as client:
        client.get(reverse("console:login"))
        statuses = []
        for number, address in enumerate(forwarded_for):
            response = client.post(
                reverse("console:login"),
                data={
                    "username": f"nobody-{source}-{number}",
                    "password": "wrong",
                    "csrfmiddlewaretoken": client.cookies["csrftoken"],
                },
                headers={"X-Forwarded-For": address},
            )
            statuses.append(response.status_code)
        return statuses


def _bad_keys(server: Server, source: str, forwarded_for: list[str]) -> list[int]:
    """One wrong key per forwarded address, each with a different lookup (so no lookup's count trips)."""
    with _client(server, source) as client:
        return [
            client.get(
                reverse("agent-whoami"),
                headers={
                    "Authorization": f"Bearer ak_{secrets.token_hex(6)}_{secrets.token_urlsafe(24)}",
                    "X-Forwarded-For": address,
                },
            ).status_code
            for address in forwarded_for
        ]


def test_rotating_x_forwarded_for_does_not_escape_the_login_lock(server):
    statuses = _failed_logins(server, ATTACKER, [f"198.51.100.{n}" for n in range(1, 31)])
    # The form again with its error, until the failure that reaches the limit locks the attacker's real address.
    assert statuses == [200] * (FAILURE_LIMIT - 1) + [429] * (30 - FAILURE_LIMIT + 1)


def test_rotating_x_forwarded_for_does_not_escape_the_bad_key_limit(server):
    statuses = _bad_keys(server, ATTACKER, [f"198.51.100.{n}" for n in range(1, 61)])
    assert set(statuses) == {401, 429}
    # Counted per fixed minute: the 60 requests span at most two, each letting the limit's worth through.
    assert statuses.count(429) >= 60 - 2 * BAD_KEYS_PER_MINUTE


def test_the_trusted_proxy_still_names_each_client(server):
    """The same requests from the proxy's address: each forwarded client has a count of its own, so the
    header is honoured where it should be (and the two tests above are not passing by accident)."""
    logins = _failed_logins(server, PROXY, [f"203.0.113.{n}" for n in range(1, 31)])
    assert logins == [200] * 30
    keys = _bad_keys(server, PROXY, [f"203.0.114.{n}" for n in range(1, 61)])
    assert keys == [401] * 60


@pytest.mark.parametrize("server", ["front door"], indirect=True)
def test_a_plain_http_client_cannot_claim_https_through_the_front_door(server):
    """Django believes X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER), so the front door sets it: a client on
    plain HTTP that writes `https` is still seen as insecure (no Strict-Transport-Security, which Django
    sends only on a secure request), while the TLS proxy's `https` (AIRLOCK_TLS_PROXY, 127.0.0.1 here,
    where the test plays the proxy) is kept."""
    with _client(server, ATTACKER) as client:
        spoofed = client.get(reverse("console:login"), headers={"X-Forwarded-Proto": "https"})
    assert spoofed.status_code == 200 and "strict-transport-security" not in spoofed.headers
    with _client(server, PROXY) as proxy:
        behind_tls = proxy.get(reverse("console:login"), headers={"X-Forwarded-Proto": "https"})
    assert behind_tls.status_code == 200 and "strict-transport-security" in behind_tls.headers


def test_the_web_workers_take_the_address_the_last_untrusted_hop_saw_not_what_the_client_wrote():
    """What a client writes into X-Forwarded-For sits left of what the proxies appended: behind two trusted
    proxies, the entry the outer one appended is the client; anything further left is the client's claim."""
    proxies = TrustedProxies("127.0.0.1, 10.0.4.0/24")
    assert proxies.client("198.51.100.7, 203.0.113.9, 10.0.4.2") == "203.0.113.9"
    assert proxies.client("10.0.4.2, 127.0.0.1") == "10.0.4.2"  # every hop a proxy: the left-most
    assert proxies.client("not-an-address, 10.0.4.2") == "not-an-address"  # kept as is, never trusted
    assert "127.0.0.2" not in proxies and "10.0.4.99" in proxies


def test_the_web_workers_refuse_to_trust_everyone():
    with pytest.raises(ValueError, match="not '\\*'"):
        TrustedProxies("127.0.0.1, *")
