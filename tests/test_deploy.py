"""docker-compose.yml and the Dockerfile: Docker does not run here, so parse them and check
that they would configure Airlock the way the settings expect."""

import os
import re
import secrets
import subprocess
import sys

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from airlock.serving import front_door_server_block, stream_command, web_command
from tests.envscan import ROOT, clean_environ, settings_env_names
from tests.shipped import image_command, image_env

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
AIRLOCK_SERVICES = sorted(name for name, service in SERVICES.items() if "build" in service)
INTERPOLATION = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")


def command_of(service: str) -> str:
    command = SERVICES[service]["command"]
    return " ".join(command) if isinstance(command, list) else command


def test_the_stack_has_every_process():
    assert {"postgres", "redis", "migrate", "front-door", "web", "stream", "worker", "beat"} <= set(SERVICES)
    assert AIRLOCK_SERVICES == ["beat", "migrate", "stream", "web", "worker"]
    assert "granian --interface wsgi" in command_of("web") and command_of("web").endswith("airlock.wsgi:application")
    assert "uvicorn airlock.asgi:application" in command_of("stream")
    assert "celery -A console worker" in command_of("worker")
    assert "celery -A console beat" in command_of("beat")
    assert "manage.py migrate" in command_of("migrate")


@pytest.mark.parametrize("service", AIRLOCK_SERVICES)
def test_every_airlock_service_names_every_variable_the_settings_read(service):
    environment = SERVICES[service]["environment"]
    missing = sorted(settings_env_names() - set(environment))
    assert not missing, f"{service} does not set {missing} (docker-compose.yml, x-airlock-environment)"
    assert environment["DEBUG"] == "0"
    assert environment["REDIS_URL"].startswith("redis://redis:")
    assert environment["DATABASE_URL"].startswith("postgres://")


@pytest.mark.parametrize("service", ["postgres", "redis", "front-door", "web", "stream", "worker", "beat"])
def test_long_running_services_have_health_checks(service):
    assert SERVICES[service]["healthcheck"]["test"]


@pytest.mark.parametrize("service", ["web", "stream", "worker", "beat"])
def test_airlock_processes_start_after_migrations_and_healthy_services(service):
    depends_on = SERVICES[service]["depends_on"]
    assert depends_on["migrate"]["condition"] == "service_completed_successfully"
    assert depends_on["redis"]["condition"] == "service_healthy"
    assert SERVICES["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def _interpolate(value: str, required: dict[str, str]) -> str:
    def replace(match: re.Match) -> str:
        name, kind, default = match.groups()
        if kind == "?":
            return required[name]
        return os.environ.get(f"COMPOSE_TEST_{name}", default or "")

    return INTERPOLATION.sub(replace, value).replace("$$", "$")


def _run_settings(env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    environ = clean_environ(os.environ, DJANGO_SETTINGS_MODULE="console.settings", **env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
    )


def test_the_compose_environment_starts_airlock_in_redis_mode(tmp_path):
    pem = (
        Ed25519PrivateKey.generate()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    required = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "airlock.example.com",
        "AIRLOCK_SIGNING_KEY": pem,
        "AIRLOCK_SEALING_KEY": secrets.token_urlsafe(32),
        "AIRLOCK_PUBLIC_URL": "https://airlock.example.com",
    }
    env = {name: _interpolate(str(value), required) for name, value in SERVICES["web"]["environment"].items()}
    env.update(AIRLOCK_VAR_DIR=str(tmp_path), STATIC_ROOT=str(tmp_path / "static"))
    result = _run_settings(
        env,
        (
            "import django; django.setup(); from django.conf import settings; from lib.signing import key_id; "
            "print(settings.DEBUG, settings.CHANNEL_LAYERS['default']['BACKEND'], "
            "settings.DATABASES['default']['HOST'], key_id())"
        ),
    )
    assert result.returncode == 0, result.stderr
    debug, layer, db_host, _ = result.stdout.split()
    assert (debug, layer, db_host) == ("False", "channels_redis.core.RedisChannelLayer", "postgres")


def test_the_dockerfile_build_time_settings_are_accepted():
    dockerfile = (ROOT / "Dockerfile").read_text()
    step = re.search(r"RUN ((?:\w+=\S+ )+)\\\s*python manage.py collectstatic", dockerfile)
    assert step, "the Dockerfile should run collectstatic with build-only settings"
    env = dict(pair.split("=", 1) for pair in step.group(1).split())
    result = _run_settings(
        env,
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.STORAGES['staticfiles']['BACKEND'])",
    )
    assert result.returncode == 0, result.stderr
    assert "Manifest" in result.stdout
    assert '"granian", "--interface", "wsgi"' in dockerfile


TRUST_EVERYONE = re.compile(r"forwarded[-_]allow[-_]ips\W{0,8}\*", re.IGNORECASE)


def _shipped_text_files() -> list:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    paths = [ROOT / name for name in listed.stdout.splitlines() if not name.startswith("tests/")]
    texts = []
    for path in paths:
        try:
            texts.append((path, path.read_text()))
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
    return texts


def test_no_shipped_file_trusts_forwarded_headers_from_everyone():
    """`--forwarded-allow-ips '*'` lets anyone name the address the login lock and the key-guessing limit
    count by. Every form of it, in every file we ship (not only the Dockerfile and docker-compose.yml)."""
    assert TRUST_EVERYONE.search('"--proxy-headers", "--forwarded-allow-ips", "*",')  # the form the image had
    assert TRUST_EVERYONE.search("--forwarded-allow-ips '*'") and TRUST_EVERYONE.search("FORWARDED_ALLOW_IPS=*")
    assert TRUST_EVERYONE.search('FORWARDED_ALLOW_IPS: "${FORWARDED_ALLOW_IPS:-*}"')
    shipped = _shipped_text_files()
    assert {"Dockerfile", "docker-compose.yml", "README.md", "operations.md", "serve.py"} <= {
        p.name for p, _ in shipped
    }
    offenders = [str(path.relative_to(ROOT)) for path, text in shipped if TRUST_EVERYONE.search(text)]
    assert not offenders, f"these trust X-Forwarded-For from everyone: {offenders}"


def test_the_web_and_stream_processes_trust_forwarded_headers_only_from_the_front_door():
    assert image_env()["FORWARDED_ALLOW_IPS"] == "127.0.0.1,::1"
    front_door = SERVICES["front-door"]["networks"]["default"]["ipv4_address"]
    for service in ("web", "stream"):
        compose_default = INTERPOLATION.fullmatch(SERVICES[service]["environment"]["FORWARDED_ALLOW_IPS"])
        assert compose_default.groups() == ("FORWARDED_ALLOW_IPS", "-", front_door)
        assert "--forwarded-allow-ips" not in SERVICES[service]["command"]
    assert "--proxy-headers" in SERVICES["stream"]["command"]
    # The image's command and compose's are the same; neither overrides the variable on the command line.
    assert SERVICES["web"]["command"] == image_command()


def test_the_image_and_compose_run_the_process_model_that_serve_and_the_bench_run():
    """airlock/serving.py is what `manage.py serve`, the bench and the live tests start: the shipped
    commands are the same programs with the same options, on their container's address."""
    assert image_command() == ["granian", *web_command("0.0.0.0", 8000)[3:]]
    assert SERVICES["stream"]["command"] == ["uvicorn", *stream_command("0.0.0.0", 8001)[3:]]
    door = SERVICES["front-door"]
    assert door["volumes"] == ["./deploy/front-door.conf.template:/etc/nginx/templates/default.conf.template:ro"]
    upstreams = (door["environment"]["AIRLOCK_WEB_UPSTREAM"], door["environment"]["AIRLOCK_STREAM_UPSTREAM"])
    assert upstreams == ("web:8000", "stream:8001")
    block = front_door_server_block(listen="8000", web="web:8000", stream="stream:8001")
    assert "${" not in block and "server web:8000;" in block and "server stream:8001;" in block


def _nginx_tree(text: str) -> list[tuple[str, list[str], list | None]]:
    """An nginx configuration as (directive, arguments, block or None) triples, comments dropped."""
    root: list = []
    stack, words = [root], []
    for token in re.findall(r"[{};]|[^\s{};]+", re.sub(r"#[^\n]*", "", text)):
        if token == "{":
            stack[-1].append((words[0], words[1:], []))
            stack.append(stack[-1][-1][2])
        elif token == ";":
            stack[-1].append((words[0], words[1:], None))
        elif token == "}":
            stack.pop()
        if token in "{};":
            words = []
        else:
            words.append(token)
    return root


def _proxy_headers(block: list) -> dict[str, str]:
    return {args[0].lower(): " ".join(args[1:]) for name, args, _ in block if name == "proxy_set_header"}


def _entries(tree: list, directive: str, variable: str) -> tuple[list[str], dict[str, str]]:
    [(args, block)] = [(args, block) for name, args, block in tree if name == directive and args[-1] == variable]
    return args, {name: " ".join(values) for name, values, _ in block}


def test_the_front_door_sets_x_forwarded_proto_itself_on_every_route():
    """Django (SECURE_PROXY_SSL_HEADER) and uvicorn (--proxy-headers) believe X-Forwarded-Proto, so a client's
    own must never reach them: every location sends the front door's value, which is the scheme of the
    connection it accepted ($scheme) unless that connection comes from the TLS proxy in front of it
    (AIRLOCK_TLS_PROXY). nginx passes the server's proxy_set_header only into a location that sets none of
    its own, so each location's headers are read as nginx reads them."""
    tree = _nginx_tree(front_door_server_block(listen="8000", web="web:8000", stream="stream:8001"))
    [server] = [block for name, _, block in tree if name == "server"]
    locations = [(args, block) for name, args, block in server if name == "location"]
    assert len(locations) == 4
    for args, block in locations:
        headers = _proxy_headers(block) or _proxy_headers(server)
        assert headers.get("x-forwarded-proto") == "$airlock_forwarded_proto", f"location {' '.join(args)}"
    (key, _), proto = _entries(tree, "map", "$airlock_forwarded_proto")
    assert proto == {"default": "$scheme", "1": "$http_x_forwarded_proto"}
    assert _entries(tree, "geo", key)[1] == {"default": "0", "127.0.0.1": "1"}  # manage.py serve's default
    behind = _nginx_tree(front_door_server_block(listen="8000", web="w:1", stream="s:2", tls_proxy="10.0.4.0/24"))
    assert _entries(behind, "geo", key)[1] == {"default": "0", "10.0.4.0/24": "1"}
    # docker-compose.yml fills the same template: the TLS proxy's address is the operator's to give.
    door = SERVICES["front-door"]["environment"]
    assert INTERPOLATION.fullmatch(door["AIRLOCK_TLS_PROXY"]).group(1, 2) == ("AIRLOCK_TLS_PROXY", "?")
