"""Tiny typed readers for configuration from environment variables.

Each refuses a malformed value with a message that names the variable, so a
misconfigured deployment fails at start-up instead of misbehaving later.
`tests/test_deploy.py` finds every variable the settings read by scanning
`console/settings.py` for calls of these helpers, so read the environment only
through them (never `os.environ` directly) and name the variable as a literal.

An empty variable counts as unset, so `VAR=` and `${VAR:-}` in a compose file mean "the default".
"""

import math
import os
import re
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name) or default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off.")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}.")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    """A number that may have a fraction (seconds, mostly)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from None
    if not math.isfinite(value):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a finite number.")
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} is below the minimum of {minimum:g}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; unset or empty gives `default`."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_url(name: str, default: str = "") -> str:
    """An absolute http(s) base URL (`https://host[:port][/prefix]`), without the trailing slash."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    parsed = urlparse(value)
    try:
        parsed.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        parsed = parsed._replace(netloc="")
    if parsed.scheme not in {"http", "https"} or not parsed.hostname or parsed.query or parsed.fragment:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not an absolute base URL; use https://host[:port][/path], without a query or fragment."
        )
    return value.rstrip("/")


def port_list(name: str, items: list[str]) -> list[int] | None:
    """TCP ports from `env_list`; `*` alone means any port (None)."""
    if items == ["*"]:
        return None
    ports = []
    for item in items:
        if not item.isdigit() or not 1 <= int(item) <= 65535:
            raise ImproperlyConfigured(f"{name} has {item!r}, which is not a port (1-65535); use * for any port.")
        ports.append(int(item))
    return ports


RATE_LIMIT_TENANT = re.compile(r"\*|[a-z0-9][a-z0-9-]*")
# The grants' patterns (policies.models.pattern_covers): one skill, a namespace, or every skill.
RATE_LIMIT_SKILL = re.compile(r"\*|[a-z0-9_]+(\.[a-z0-9_]+)*\.\*|[a-z0-9_]+(\.[a-z0-9_]+)+")


def rate_limit_list(name: str, items: list[str]) -> list[tuple[str, str, int]]:
    """Operators' limits from `env_list` as `(tenant, skill pattern, calls a minute)`. Each item is
    `tenant:skill=calls`: tenant a slug or `*` (every tenant), skill a name (billing.create_refund),
    a namespace (billing.*) or `*`."""
    limits: dict[tuple[str, str], tuple[str, int]] = {}
    for entry in items:
        target, equals, raw_limit = entry.partition("=")
        tenant, colon, skill = target.partition(":")
        tenant, skill, raw_limit = tenant.strip(), skill.strip(), raw_limit.strip()
        problem = ""
        if not equals or not colon:
            problem = "use tenant:skill=calls_per_minute, e.g. acme:billing.*=600 or *:payments.refund=60"
        elif not RATE_LIMIT_TENANT.fullmatch(tenant):
            problem = f"{tenant!r} is not a tenant slug or *"
        elif not RATE_LIMIT_SKILL.fullmatch(skill):
            problem = f"{skill!r} is not a skill name (billing.create_refund), a namespace (billing.*) or *"
        elif not re.fullmatch(r"[0-9]+", raw_limit) or int(raw_limit) < 1:
            problem = f"{raw_limit!r} is not a whole number of calls a minute, at least 1"
        elif (tenant, skill) in limits:
            problem = f"{tenant}:{skill} is already limited by {limits[tenant, skill][0]!r}; keep one"
        if problem:
            raise ImproperlyConfigured(f"{name} entry {entry!r}: {problem}.")
        limits[tenant, skill] = (entry, int(raw_limit))
    return [(tenant, skill, per_minute) for (tenant, skill), (_, per_minute) in limits.items()]


def env_choice(name: str, default: str, choices: list[str]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r} is not one of {', '.join(choices)}.")
    return value


# Server connections per process, unless DATABASE_URL says `?pool_max_size=N`. A request (or task) holds
# one until it ends, its tool calls included, and an adapter on a gate thread (AIRLOCK_GATE_WORKERS) may take
# another meanwhile: a web worker's 8 request threads, plus 2 so that gate threads always make progress.
# PostgreSQL allows 100 connections by default (3 reserved): the documented deployment (2 web workers, 1
# stream process, 4 Celery children; beat opens none) may hold 7 x 10 = 70, leaving room for migrate, psql
# and a restarted process overlapping its predecessor. /healthz warns when AIRLOCK_DB_PROCESSES x this
# would not fit the server's max_connections (console/health.py).
DEFAULT_POOL_MAX_SIZE = 10
# Connections each pool opens as soon as its process first uses the database, and keeps while idle: none, so
# an idle deployment holds only what it used in the last ten minutes (psycopg's max_idle).
POOL_MIN_SIZE = 0
# How long a request waits for a free connection before it fails with a database error: as long as a tool
# call may take by default. While PostgreSQL is down every request waits this long (the pool cannot tell
# down from busy), so it stays short.
POOL_TIMEOUT_S = 10


def database_from_url(url: str, *, name: str = "DATABASE_URL") -> dict:
    """Turn `sqlite:///path` or `postgres://user:pass@host:port/name` into a DATABASES entry.

    PostgreSQL connections come from a bounded psycopg pool per process (Django's OPTIONS["pool"]),
    health-checked when taken: no connect per request (about 5 ms) and no more than N server
    connections per process. `?pool_max_size=N` sizes it; `?pool=off` goes back to one connection per
    request, closed after it (CONN_MAX_AGE 0); `?conn_max_age=N` keeps Django's persistent connections
    instead of the pool (the two exclude each other). Other query parameters (sslmode=...) reach psycopg.
    """
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)[1:]  # sqlite:///relative or sqlite:////absolute
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path or ":memory:"}
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        database = unquote(parsed.path.lstrip("/"))
        if not database:
            raise ImproperlyConfigured(f"{name} names no database (postgres://user@host:port/<database>).")
        try:
            port = parsed.port
        except ValueError:
            raise ImproperlyConfigured(f"{name} has a port that is not a number.") from None
        options = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
        conn_max_age, pool = _postgres_connections(options, name)
        if pool:
            options["pool"] = pool
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": database,
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(port or ""),
            "CONN_MAX_AGE": conn_max_age,
            "CONN_HEALTH_CHECKS": bool(pool) or conn_max_age > 0,  # a pooled connection is checked when taken
            "OPTIONS": options,
        }
    raise ImproperlyConfigured(
        f"{name} scheme {parsed.scheme!r} is not supported; use sqlite:///path or postgres://user@host/name."
    )


def _postgres_connections(options: dict, name: str) -> tuple[int, dict | None]:
    """(CONN_MAX_AGE, pool options or None) from DATABASE_URL's pool, pool_max_size and conn_max_age."""
    raw_switch = options.pop("pool", "").strip().lower()
    raw_size = options.pop("pool_max_size", None)
    raw_age = options.pop("conn_max_age", None)
    if raw_switch and raw_switch not in TRUE_WORDS | FALSE_WORDS:
        raise ImproperlyConfigured(f"{name} has pool={raw_switch!r}; use pool=on or pool=off.")
    if raw_age is not None:
        if raw_switch in TRUE_WORDS or raw_size is not None:
            raise ImproperlyConfigured(
                f"{name} has conn_max_age with the pool; they exclude each other: use pool_max_size=N for "
                "the pool, or conn_max_age=N alone for persistent connections without it."
            )
        if not raw_age.isdigit():
            raise ImproperlyConfigured(f"{name} has conn_max_age={raw_age!r}, which is not a whole number of seconds.")
        return int(raw_age), None
    if raw_switch in FALSE_WORDS:
        if raw_size is not None:
            raise ImproperlyConfigured(f"{name} has pool_max_size with pool={raw_switch}; drop one of them.")
        return 0, None
    size = str(DEFAULT_POOL_MAX_SIZE) if raw_size is None else raw_size
    if not size.isdigit() or int(size) < 1:
        raise ImproperlyConfigured(f"{name} has pool_max_size={raw_size!r}; use a whole number >= 1.")
    return 0, {"min_size": POOL_MIN_SIZE, "max_size": int(size), "timeout": POOL_TIMEOUT_S}


# channels_redis's idle consumer waits on Redis in a blocking read that the server ends after
# `RedisChannelLayer.brpop_timeout` (5 s), and redis-py 8 gives every socket read a 5 s timeout by default:
# each idle read lost that race and the inbox socket closed 5 s after it connected (channels_redis#422,
# redis-py#4091). A read timeout that outlives the blocking read keeps idle sockets open and still notices,
# within that time, a Redis that stopped answering. tests/approvals/test_idle_inbox.py holds both to it.
CHANNEL_LAYER_READ_TIMEOUT_S = 15
CHANNEL_LAYER_CONNECT_TIMEOUT_S = 5


def channel_layer_from_url(url: str, *, prefix: str) -> dict:
    """A CHANNEL_LAYERS entry for channels_redis on `url`, its sockets' timeouts set explicitly."""
    host = {
        "address": url,
        "socket_timeout": CHANNEL_LAYER_READ_TIMEOUT_S,
        "socket_connect_timeout": CHANNEL_LAYER_CONNECT_TIMEOUT_S,
    }
    return {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [host], "prefix": prefix}}
