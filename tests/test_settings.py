"""Settings come from the environment alone: modes switch on REDIS_URL, bad values refuse to start.

Each case runs a fresh Python process, because settings are read once at import.
"""

import json
import os
import secrets
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.envscan import ROOT, clean_environ, settings_env_names

REPORT = """
import json, django
django.setup()
from django.conf import settings
from console.celery import app
print(json.dumps({
    "channel_layer": settings.CHANNEL_LAYERS["default"]["BACKEND"],
    "cache": settings.CACHES["default"]["BACKEND"],
    "celery_eager": app.conf.task_always_eager,
    "broker": app.conf.broker_url,
    "database": settings.DATABASES["default"]["ENGINE"],
}))
"""


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = clean_environ(os.environ, DJANGO_SETTINGS_MODULE="console.settings", **env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
    )


def report(**env: str) -> dict:
    result = run_python(REPORT, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def refusal(**env: str) -> str:
    result = run_python("import django; django.setup()", **env)
    assert result.returncode != 0, "settings accepted a configuration they should refuse"
    return result.stderr.strip().splitlines()[-1]


def production_env(tmp_path) -> dict[str, str]:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "airlock.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://airlock.example.com",
        "AIRLOCK_SIGNING_KEY": pem.decode(),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'prod.sqlite3'}",
        "AIRLOCK_VAR_DIR": str(tmp_path / "var"),
    }


def test_without_redis_url_everything_is_embedded():
    assert report() == {
        "channel_layer": "channels.layers.InMemoryChannelLayer",
        "cache": "django.core.cache.backends.locmem.LocMemCache",
        "celery_eager": True,
        "broker": "memory://",
        "database": "django.db.backends.sqlite3",
    }


def test_redis_url_alone_switches_channels_cache_and_celery_to_redis():
    # Nothing connects at start-up, so the port need not answer.
    assert report(REDIS_URL="redis://127.0.0.1:6399/3") == {
        "channel_layer": "channels_redis.core.RedisChannelLayer",
        "cache": "django.core.cache.backends.redis.RedisCache",
        "celery_eager": False,
        "broker": "redis://127.0.0.1:6399/3",
        "database": "django.db.backends.sqlite3",
    }


def test_database_url_picks_postgresql():
    assert report(DATABASE_URL="postgres://airlock:pw@db:5432/airlock")["database"] == "django.db.backends.postgresql"


def test_debug_off_without_secret_key_refuses_to_start(tmp_path):
    env = production_env(tmp_path)
    del env["SECRET_KEY"]
    message = refusal(**env)
    assert "ImproperlyConfigured" in message and "SECRET_KEY must be set when DEBUG is off" in message


def test_debug_off_without_allowed_hosts_or_signing_key_refuses_to_start(tmp_path):
    env = production_env(tmp_path)
    del env["ALLOWED_HOSTS"]
    assert "ALLOWED_HOSTS must be set" in refusal(**env)
    env = production_env(tmp_path)
    del env["AIRLOCK_SIGNING_KEY"]
    assert "AIRLOCK_SIGNING_KEY must be set" in refusal(**env)


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("DEBUG", "maybe", "DEBUG='maybe' is not a boolean"),
        ("DATABASE_URL", "mysql://db/airlock", "DATABASE_URL scheme 'mysql' is not supported"),
        ("DATABASE_URL", "postgres://db:notaport/airlock", "DATABASE_URL has a port that is not a number"),
        ("DATABASE_URL", "postgres://db:5432/", "DATABASE_URL names no database"),
        ("REDIS_URL", "localhost:6379", "REDIS_URL must start with redis://"),
        ("CELERY_VISIBILITY_TIMEOUT", "soon", "CELERY_VISIBILITY_TIMEOUT='soon' is not a whole number"),
        ("LOG_LEVEL", "LOUD", "LOG_LEVEL='LOUD' is not one of"),
        ("CSRF_TRUSTED_ORIGINS", "airlock.example.com", "must start with https://"),
    ],
)
def test_malformed_values_refuse_to_start_naming_the_variable(variable, value, expected):
    message = refusal(**{variable: value})
    assert "ImproperlyConfigured" in message
    assert expected in message


def test_check_deploy_passes_with_production_settings(tmp_path):
    result = run_python(
        "import sys; from django.core.management import execute_from_command_line; "
        "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])",
        **production_env(tmp_path),
    )
    hint = ("drf_spectacular warnings belong to the app in the path they name: give its API view an "
            "operation_id or a serializer with @extend_schema.\n")
    assert result.returncode == 0, hint + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_reports_an_unreadable_signing_key(tmp_path):
    env = production_env(tmp_path)
    env["AIRLOCK_SIGNING_KEY"] = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----"
    result = run_python(
        "from django.core.management import execute_from_command_line; "
        "execute_from_command_line(['manage.py', 'check', '--deploy'])",
        **env,
    )
    assert result.returncode != 0
    assert "airlock.E001" in result.stderr


def test_signing_key_may_be_given_with_escaped_newlines(tmp_path):
    env = production_env(tmp_path)
    env["AIRLOCK_SIGNING_KEY"] = env["AIRLOCK_SIGNING_KEY"].strip().replace("\n", "\\n")
    result = run_python("import django; django.setup(); from lib.signing import key_id; print(key_id())", **env)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip()) == 16


def test_the_scan_finds_the_variables_the_readme_documents():
    names = settings_env_names()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS",
            "AIRLOCK_SIGNING_KEY"} <= names
    readme = (ROOT / "README.md").read_text()
    undocumented = sorted(name for name in names if f"`{name}`" not in readme)
    assert not undocumented, f"document these in the README's configuration table: {undocumented}"
