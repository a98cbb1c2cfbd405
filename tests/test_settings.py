"""Settings come from the environment alone: modes switch on REDIS_URL, bad values refuse to start.

Each case runs a fresh Python process, because settings are read once at import.
"""

import json
import os
import re
import secrets
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.exceptions import ImproperlyConfigured

from console.env import DEFAULT_POOL_MAX_SIZE, POOL_MIN_SIZE, database_from_url
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
        "AIRLOCK_PUBLIC_URL": "https://airlock.example.com",
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


POSTGRES_URL = "postgres://airlock:pw@db:5432/airlock"


def test_postgresql_connections_come_from_a_bounded_pool_unless_told_otherwise():
    # The settings a server starts with, not only the helper: no connect per request, at most N per process.
    pool = run_python(
        "import json, django; django.setup(); from django.conf import settings; "
        "print(json.dumps(settings.DATABASES['default']['OPTIONS'].get('pool')))",
        DATABASE_URL=POSTGRES_URL,
    )
    assert pool.returncode == 0, pool.stderr
    assert json.loads(pool.stdout.strip().splitlines()[-1])["max_size"] == DEFAULT_POOL_MAX_SIZE
    entry = database_from_url(POSTGRES_URL)
    assert entry["CONN_MAX_AGE"] == 0  # Django refuses a pool with persistent connections
    assert entry["CONN_HEALTH_CHECKS"]  # a connection that died idle in the pool is replaced, not handed out


POOL_REPORT = """
import json, django
django.setup()
from django.conf import settings
from console.celery import app
print(json.dumps({
    "pool": settings.DATABASES["default"]["OPTIONS"]["pool"],
    "processes": settings.AIRLOCK_DB_PROCESSES,
    "celery_children": app.conf.worker_concurrency,
}))
"""
# PostgreSQL's defaults: max_connections 100, of which superuser_reserved_connections 3.
POSTGRES_DEFAULT_AVAILABLE = 100 - 3


def pool_report(**env: str) -> dict:
    result = run_python(POOL_REPORT, DATABASE_URL=POSTGRES_URL, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_documented_deployment_fits_postgresqls_default_max_connections_with_room_to_spare():
    """2 web workers, 1 stream process and the Celery children, each with the default pool, may hold at most
    three quarters of what a stock PostgreSQL allows: the rest is for migrate, psql and a restart's overlap."""
    defaults = pool_report()
    assert defaults["celery_children"] == 4  # pinned, not the host's CPU count
    assert defaults["processes"] == 2 + 1 + defaults["celery_children"]
    assert defaults["pool"]["max_size"] == DEFAULT_POOL_MAX_SIZE
    assert defaults["pool"]["min_size"] == POOL_MIN_SIZE == 0  # no connection opened before it is needed
    assert defaults["processes"] * defaults["pool"]["max_size"] <= 0.75 * POSTGRES_DEFAULT_AVAILABLE


def test_more_celery_children_are_counted_unless_the_operator_declares_the_processes():
    scaled = pool_report(CELERY_WORKER_CONCURRENCY="12")
    assert scaled["celery_children"] == 12
    assert scaled["processes"] == 2 + 1 + 12
    declared = pool_report(CELERY_WORKER_CONCURRENCY="12", AIRLOCK_DB_PROCESSES="40")
    assert declared["processes"] == 40


@pytest.mark.parametrize(
    ("query", "pool_max_size", "conn_max_age"),
    [
        ("", DEFAULT_POOL_MAX_SIZE, 0),
        ("?pool_max_size=4", 4, 0),
        ("?pool=on&pool_max_size=2", 2, 0),
        ("?pool=off", None, 0),  # one connection per request, closed after it
        ("?conn_max_age=60", None, 60),  # Django's persistent connections instead of the pool
        ("?pool=off&conn_max_age=0", None, 0),
    ],
)
def test_database_url_sizes_or_switches_off_the_pool(query, pool_max_size, conn_max_age):
    entry = database_from_url(POSTGRES_URL + query)
    pool = entry["OPTIONS"].get("pool")
    assert (pool["max_size"] if pool else None) == pool_max_size
    assert entry["CONN_MAX_AGE"] == conn_max_age
    assert entry["CONN_HEALTH_CHECKS"] == bool(pool or conn_max_age)
    assert not {"pool_max_size", "conn_max_age"} & set(entry["OPTIONS"])  # never passed on to psycopg


def test_database_url_passes_other_parameters_to_psycopg_beside_the_pool():
    options = database_from_url(POSTGRES_URL + "?sslmode=require&pool_max_size=3")["OPTIONS"]
    assert options["sslmode"] == "require" and options["pool"]["max_size"] == 3


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?pool_max_size=0", "pool_max_size='0'; use a whole number >= 1"),
        ("?pool_max_size=lots", "pool_max_size='lots'; use a whole number >= 1"),
        ("?pool_max_size=-2", "pool_max_size='-2'; use a whole number >= 1"),
        ("?pool=maybe", "pool='maybe'; use pool=on or pool=off"),
        ("?pool=off&pool_max_size=4", "pool_max_size with pool=off"),
        ("?conn_max_age=60&pool_max_size=4", "conn_max_age with the pool; they exclude each other"),
        ("?conn_max_age=60&pool=on", "conn_max_age with the pool; they exclude each other"),
        ("?conn_max_age=soon", "conn_max_age='soon', which is not a whole number"),
        ("?conn_max_age=-1", "conn_max_age='-1', which is not a whole number"),
    ],
)
def test_database_url_refuses_contradictory_or_malformed_pool_settings(query, expected):
    with pytest.raises(ImproperlyConfigured, match=re.escape(expected)):
        database_from_url(POSTGRES_URL + query)


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
        ("DATABASE_URL", "postgres://db/airlock?pool_max_size=0", "DATABASE_URL has pool_max_size='0'"),
        ("REDIS_URL", "localhost:6379", "REDIS_URL must start with redis://"),
        ("CELERY_VISIBILITY_TIMEOUT", "soon", "CELERY_VISIBILITY_TIMEOUT='soon' is not a whole number"),
        ("LOG_LEVEL", "LOUD", "LOG_LEVEL='LOUD' is not one of"),
        ("CSRF_TRUSTED_ORIGINS", "airlock.example.com", "must start with https://"),
        ("AIRLOCK_PUBLIC_URL", "airlock.example.com", "AIRLOCK_PUBLIC_URL='airlock.example.com' is not an absolute"),
        ("AIRLOCK_PUBLIC_URL", "ftp://airlock.example.com", "AIRLOCK_PUBLIC_URL='ftp://airlock.example.com' is not"),
        ("AIRLOCK_PUBLIC_URL", "https://airlock.example.com/?next=1", "AIRLOCK_PUBLIC_URL="),
        ("AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE", "lots", "AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE='lots' is not a whole"),
        ("AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE", "0", "AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE=0 is below the minimum"),
        ("AIRLOCK_RATE_LIMITS", "acme:billing.*=60,acme:billing*=9", "AIRLOCK_RATE_LIMITS entry 'acme:billing*=9'"),
        ("AIRLOCK_RATE_LIMITS", "acme:agent=900", "AIRLOCK_RATE_LIMITS entry 'acme:agent=900': 'agent' is not a skill"),
        ("AIRLOCK_GATE_WORKERS", "0", "AIRLOCK_GATE_WORKERS=0 is below the minimum of 1"),
        ("AIRLOCK_DB_PROCESSES", "0", "AIRLOCK_DB_PROCESSES=0 is below the minimum of 1"),
        ("CELERY_WORKER_CONCURRENCY", "auto", "CELERY_WORKER_CONCURRENCY='auto' is not a whole number"),
        ("AIRLOCK_RETRY_BASE_SECONDS", "fast", "AIRLOCK_RETRY_BASE_SECONDS='fast' is not a number"),
        ("AIRLOCK_RETRY_CAP_SECONDS", "-1", "AIRLOCK_RETRY_CAP_SECONDS='-1' is below the minimum"),
        ("AIRLOCK_BREAKER_FAILURE_THRESHOLD", "0", "AIRLOCK_BREAKER_FAILURE_THRESHOLD=0 is below the minimum of 1"),
        ("AIRLOCK_BREAKER_WINDOW_SECONDS", "1.5", "AIRLOCK_BREAKER_WINDOW_SECONDS='1.5' is not a whole number"),
        ("AIRLOCK_BREAKER_OPEN_SECONDS", "inf", "AIRLOCK_BREAKER_OPEN_SECONDS='inf' is not a finite number"),
        ("AIRLOCK_BREAKER_PROBE_SECONDS", "soon", "AIRLOCK_BREAKER_PROBE_SECONDS='soon' is not a whole number"),
        ("AIRLOCK_JOB_FIRST_CHECK_SECONDS", "nan", "AIRLOCK_JOB_FIRST_CHECK_SECONDS='nan' is not a finite"),
        ("AIRLOCK_JOB_CHECK_BASE_SECONDS", "2s", "AIRLOCK_JOB_CHECK_BASE_SECONDS='2s' is not a number"),
        ("AIRLOCK_JOB_CHECK_CAP_SECONDS", "900", "AIRLOCK_JOB_CHECK_CAP_SECONDS=900 must be below CELERY_VISIBILITY"),
        ("AIRLOCK_JOB_MAX_CHECKS", "0", "AIRLOCK_JOB_MAX_CHECKS=0 is below the minimum of 1"),
        ("AIRLOCK_RECONCILE_FIRST_CHECK_SECONDS", "x", "AIRLOCK_RECONCILE_FIRST_CHECK_SECONDS='x' is not a number"),
        ("AIRLOCK_APPROVAL_ESCALATE_AFTER_MINUTES", "0", "AIRLOCK_APPROVAL_ESCALATE_AFTER_MINUTES=0 is below"),
        ("AIRLOCK_WEBHOOK_TIMEOUT_SECONDS", "0", "AIRLOCK_WEBHOOK_TIMEOUT_SECONDS='0' is below the minimum of 0.1"),
        ("AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS", "two", "AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS='two' is not a number"),
        ("AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS", "3600", "AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS=3600 must be below"),
        ("AIRLOCK_WEBHOOK_MAX_ATTEMPTS", "many", "AIRLOCK_WEBHOOK_MAX_ATTEMPTS='many' is not a whole number"),
        ("TRACES_INGEST_MAX_BODY_BYTES", "5MB", "TRACES_INGEST_MAX_BODY_BYTES='5MB' is not a whole number"),
        ("TRACES_INGEST_MAX_DECODED_BYTES", "0", "TRACES_INGEST_MAX_DECODED_BYTES=0 is below the minimum"),
        ("TRACES_INGEST_MAX_SPANS", "-5", "TRACES_INGEST_MAX_SPANS=-5 is below the minimum of 1"),
        ("TRACES_INGEST_MAX_ATTRIBUTE_BYTES", "big", "TRACES_INGEST_MAX_ATTRIBUTE_BYTES='big' is not a whole"),
        ("TRACES_INGEST_MAX_INFLIGHT", "0", "TRACES_INGEST_MAX_INFLIGHT=0 is below the minimum of 1"),
        ("TRACES_INGEST_SPANS_PER_MINUTE", "1e6", "TRACES_INGEST_SPANS_PER_MINUTE='1e6' is not a whole number"),
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
    hint = (
        "drf_spectacular warnings belong to the app in the path they name: give its API view an "
        "operation_id or a serializer with @extend_schema.\n"
    )
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
    assert {
        "DATABASE_URL",
        "REDIS_URL",
        "SECRET_KEY",
        "DEBUG",
        "ALLOWED_HOSTS",
        "CSRF_TRUSTED_ORIGINS",
        "AIRLOCK_SIGNING_KEY",
    } <= names
    readme = (ROOT / "README.md").read_text()
    undocumented = sorted(name for name in names if f"`{name}`" not in readme)
    assert not undocumented, f"document these in the README's configuration table: {undocumented}"


def test_debug_off_without_a_public_url_refuses_to_start(tmp_path):
    env = production_env(tmp_path)
    del env["AIRLOCK_PUBLIC_URL"]
    assert "AIRLOCK_PUBLIC_URL must be set when DEBUG is off" in refusal(**env)


# Each tunable, set from the environment to something other than its default: (value, the setting).
TUNABLES = {
    "AIRLOCK_PUBLIC_URL": ("https://airlock.example.com/prefix/", "https://airlock.example.com/prefix"),
    "AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE": ("1", 1),
    "AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE": ("7", 7),
    "AIRLOCK_RATE_LIMITS": (
        "acme:orders.*=2, *:billing.refund=1",
        [["acme", "orders.*", 2], ["*", "billing.refund", 1]],
    ),
    "AIRLOCK_GATE_WORKERS": ("3", 3),
    "AIRLOCK_RETRY_BASE_SECONDS": ("0.25", 0.25),
    "AIRLOCK_RETRY_CAP_SECONDS": ("4", 4.0),
    "AIRLOCK_BREAKER_FAILURE_THRESHOLD": ("2", 2),
    "AIRLOCK_BREAKER_WINDOW_SECONDS": ("45", 45),
    "AIRLOCK_BREAKER_OPEN_SECONDS": ("120", 120.0),
    "AIRLOCK_BREAKER_PROBE_SECONDS": ("9", 9),
    "AIRLOCK_JOB_FIRST_CHECK_SECONDS": ("1.5", 1.5),
    "AIRLOCK_JOB_CHECK_BASE_SECONDS": ("3", 3.0),
    "AIRLOCK_JOB_CHECK_CAP_SECONDS": ("60", 60.0),
    "AIRLOCK_JOB_MAX_CHECKS": ("4", 4),
    "AIRLOCK_RECONCILE_FIRST_CHECK_SECONDS": ("7.5", 7.5),
    "AIRLOCK_APPROVAL_ESCALATE_AFTER_MINUTES": ("7", 7),
    "AIRLOCK_WEBHOOK_TIMEOUT_SECONDS": ("2.5", 2.5),
    "AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS": ("3", 3.0),
    "AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS": ("10", 10.0),
    "AIRLOCK_WEBHOOK_MAX_ATTEMPTS": ("2", 2),
    "TRACES_INGEST_MAX_BODY_BYTES": ("1000", 1000),
    "TRACES_INGEST_MAX_DECODED_BYTES": ("2000", 2000),
    "TRACES_INGEST_MAX_SPANS": ("5", 5),
    "TRACES_INGEST_MAX_ATTRIBUTE_BYTES": ("100", 100),
    "TRACES_INGEST_MAX_INFLIGHT": ("1", 1),
    "TRACES_INGEST_SPANS_PER_MINUTE": ("50", 50),
}

# The real code paths, in a process whose only configuration is the environment above.
BEHAVIOUR = """
import json, django
django.setup()
from datetime import datetime, timedelta, UTC
from types import SimpleNamespace
from django.conf import settings
from approvals.delivery import _http, backoff_seconds
from approvals.services import escalation_threshold
from reliability.jobs import callback_url_for, job_config
from reliability.reconcile import first_check_delay
from runs import ratelimit
from runs.errors import RateLimited, Unavailable
from runs.execution import pool
from runs.plane import breakers
from runs.plane.execution import retry_config
from traces.ingest import IngestError, capacity_slot

out = {"settings": {name: getattr(settings, name) for name in json.loads(NAMES)}}
out["callback"] = callback_url_for("run-1", "call-1")
ratelimit.check_agent(41)
try:
    ratelimit.check_agent(41)
    out["second_call"] = "allowed"
except RateLimited as exc:
    out["second_call"] = exc.code
out["skill_calls_allowed"] = {}
for tenant_id, slug in ((1, "acme"), (2, "globex")):
    allowed = 0
    try:
        for _ in range(10):
            ratelimit.check_skill("orders.lookup", {}, tenant_id=tenant_id, tenant_slug=slug)
            allowed += 1
    except RateLimited:
        out["skill_calls_allowed"][slug] = allowed
closed = breakers.Admission("closed", probe=False)
out["breaker_opened_after"] = [len(breakers.record_failure("https://down.example", closed, reason="test"))
                               for _ in range(2)]
try:
    breakers.admit("https://down.example")
except Unavailable as exc:
    out["breaker_retry_after"] = exc.extra.get("retry_after")
out["webhook_backoff"] = [backoff_seconds(n, jitter=False) for n in range(1, 5)]
out["webhook_timeout"] = _http().timeout.read
now = datetime.now(UTC)
out["escalate_after_s"] = escalation_threshold(SimpleNamespace(created_at=now, expires_at=now + timedelta(hours=10))
                                               ).total_seconds()
out["job_config"] = job_config()
out["retry_config"] = retry_config()
out["reconcile_first_s"] = first_check_delay().total_seconds()
out["gate_workers"] = pool()._max_workers
with capacity_slot():
    try:
        with capacity_slot():
            out["second_ingest"] = "admitted"
    except IngestError as exc:
        out["second_ingest"] = exc.status
print(json.dumps(out))
"""


def test_every_tunable_is_read_from_the_environment_and_changes_what_it_names():
    assert set(TUNABLES) <= settings_env_names()
    env = {name: value for name, (value, _) in TUNABLES.items()}
    code = BEHAVIOUR.replace("json.loads(NAMES)", repr(sorted(TUNABLES)))
    result = run_python(code, **env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["settings"] == {name: expected for name, (_, expected) in TUNABLES.items()}
    assert out["callback"].startswith("https://airlock.example.com/prefix/api/")
    assert out["second_call"] == "agent_rate_limited"
    assert out["skill_calls_allowed"] == {"acme": 2, "globex": 7}
    assert out["breaker_opened_after"] == [0, 1] and out["breaker_retry_after"] == 120
    assert out["webhook_backoff"] == [3, 6, 10, 10] and out["webhook_timeout"] == 2.5
    assert out["escalate_after_s"] == 7 * 60
    assert out["job_config"] == {"first_check_s": 1.5, "base_s": 3.0, "cap_s": 60.0, "max_checks": 4}
    assert out["retry_config"] == {"base_s": 0.25, "cap_s": 4.0}
    assert out["reconcile_first_s"] == 7.5 and out["gate_workers"] == 3
    assert out["second_ingest"] == 503


def test_code_reads_settings_by_name_never_with_a_fallback():
    """`getattr(settings, "X", default)` hides a setting from the environment and the README: every
    tunable is in console/settings.py, so code reads `settings.X` (tests override with the fixture)."""
    skip = {".venv", ".git", "tests", "node_modules"}
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        if skip & set(path.relative_to(ROOT).parts):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "getattr(settings" in line.replace(" ", "") or "getattr(django_settings" in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert not offenders, f"read these as settings.X and add them to console/settings.py: {offenders}"
