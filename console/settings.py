"""Airlock settings, read only from environment variables (see the README's table).

Unset REDIS_URL and DATABASE_URL give the embedded default: SQLite, the in-memory
channel layer, eager Celery and a local-memory cache, all in one process.
"""

from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from console.env import (
    channel_layer_from_url,
    database_from_url,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_str,
    env_url,
    port_list,
    rate_limit_list,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("AIRLOCK_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", True)

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off: a long random string, for example the output of "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'."
        )
    SECRET_KEY = "airlock-development-only-secret-key-do-not-use-in-production"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"] if DEBUG else [])
if not ALLOWED_HOSTS and not DEBUG:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set when DEBUG is off: the host names Airlock answers to.")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
for _origin in CSRF_TRUSTED_ORIGINS:
    if not _origin.startswith(("http://", "https://")):
        raise ImproperlyConfigured(f"CSRF_TRUSTED_ORIGINS entry {_origin!r} must start with https:// or http://.")
# The console's address as outsiders reach it: long-running tools' callback URL, links in e-mail. Never
# guessed from ALLOWED_HOSTS or a request's Host header (which a Celery task has none of).
AIRLOCK_PUBLIC_URL = env_url("AIRLOCK_PUBLIC_URL", "http://127.0.0.1:8000" if DEBUG else "")
if not AIRLOCK_PUBLIC_URL:
    raise ImproperlyConfigured(
        "AIRLOCK_PUBLIC_URL must be set when DEBUG is off: the https:// address tools and people reach the "
        "console at (long-running jobs call back there; e-mails link there), e.g. https://airlock.example.com."
    )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Redoc's script, vendored and pinned: /api/docs/ works offline
    "django_htmx",
    "template_partials",
    "audit",
    "console",
    "registry",
    "policies",
    "runs",
    "approvals",
    "traces",
    "reliability",
    "retention",
    "airlock",  # the project shell: root URLconf, ASGI app, home page, seed_demo (imports every app)
    "axes",
]

MIDDLEWARE = [
    # First: probes reach /healthz by IP over plain HTTP, before host checks and the HTTPS redirect.
    "console.health.HealthCheckMiddleware",
    # Before any view: a NUL or a lone surrogate in the path or query is a 400, not a 500.
    "console.unsafe_input.UnsafeInputMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.csp.ConsoleCSPMiddleware",  # CONTENT_SECURITY_POLICY below, plus ws(s)://<this host>
    "django_htmx.middleware.HtmxMiddleware",
    "console.tenancy.CurrentTenantMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the login page saying so.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "airlock.urls"
ASGI_APPLICATION = "airlock.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "airlock.context_processors.shell",
            ],
        },
    },
]

DATABASES = {"default": database_from_url(env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'airlock.sqlite3'}"))}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets readers (the long poll, the inbox) run beside a writer; NORMAL sync is safe with WAL
    # and spares an fsync per commit in the embedded, single-machine mode.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Celery worker children (prefork), each with its own connection pool. Celery's own default is the host's
# CPU count, which would tie the connections a deployment needs to the machine it lands on; the command
# line's --concurrency still wins over this.
CELERY_WORKER_CONCURRENCY = env_int("CELERY_WORKER_CONCURRENCY", 4, minimum=1)
# Processes that hold a connection pool on this database, every machine counted: web workers, stream
# processes and Celery worker children (beat and a worker's parent open none). By default the documented
# deployment: 2 web workers and 1 stream process, plus the Celery children above. /healthz warns when this
# times the pool's max_size would not fit the server's max_connections (console/health.py).
AIRLOCK_DB_PROCESSES = env_int("AIRLOCK_DB_PROCESSES", 3 + CELERY_WORKER_CONCURRENCY, minimum=1)

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured("REDIS_URL must start with redis://, rediss:// or unix://.")
if REDIS_URL:
    CHANNEL_LAYERS = {"default": channel_layer_from_url(REDIS_URL, prefix=env_str("AIRLOCK_CHANNEL_PREFIX", "airlock"))}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Celery: eager in the embedded default, Redis broker and result backend otherwise.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
# One result backend (and Redis connection pool) per process, not one per thread: Celery builds it on a
# thread's first `.delay()`, which cost a request thread more than the rest of queueing its task.
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False  # workers log through LOGGING below, secrets masked
# Celery's Django fixup closes every database connection, and Django's psycopg pool with it, around
# each task unless this is set (celery#10554): each task then opened a new pool and connection.
# With it set, the fixup only recycles them every 2 × N tasks, and console/celery.py hands the
# connection back to the pool after each task, as Django does after a request.
CELERY_DB_REUSE_MAX = 500
# A resume task that is not acknowledged within this window is delivered again; tasks are
# idempotent (they claim their row first), so redelivery is safe. Keep it above the longest task.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 900, minimum=30)}
# Three queues, and a worker started without -Q consumes them all, taking them in turn: resuming an approved
# call or telling its agent never waits behind a burst of notifications (an approval in a tenant of 100
# approvers queues 100 e-mails). A worker given -Q must name all three.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = [Queue("celery"), Queue("resume"), Queue("webhooks")]  # approvals.tasks.*_QUEUE
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Every periodic task, in one place (beat in a deployment, `run_periodic` in the embedded mode);
# tests/console/test_periodic.py checks that each names a registered task.
CELERY_BEAT_SCHEDULE: dict = {
    "policies: snapshot after grants expire": {"task": "policies.tasks.publish_expired_grants", "schedule": 30.0},
    "reliability: follow jobs, ask tools about unknowns": {
        "task": "reliability.tasks.sweep_due_work",
        "schedule": 10.0,
    },
    "approvals: expire stale requests": {"task": "approvals.tasks.expire_approvals", "schedule": 15.0},
    "approvals: escalate overdue requests": {"task": "approvals.tasks.escalate_approvals", "schedule": 60.0},
    "approvals: mail approvers' digests": {"task": "approvals.tasks.send_digests", "schedule": 60.0},
    "approvals: record outcomes of settled calls": {"task": "approvals.tasks.resume_orphans", "schedule": 30.0},
    "traces: evaluate alert rules": {"task": "traces.tasks.evaluate_alerts", "schedule": 60.0},
    "traces: delete traces past retention": {"task": "traces.tasks.purge_expired_traces", "schedule": 600.0},
    "traces: forward spans to tenants' OTLP endpoints": {"task": "traces.tasks.forward_all", "schedule": 15.0},
    "audit: sign the heads of the audit chains": {"task": "audit.tasks.sign_checkpoints", "schedule": 300.0},
    "retention: delete closed runs past retention, then expired audit rows": {
        "task": "retention.tasks.purge_expired_records",
        "schedule": 600.0,
    },
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:home"
LOGOUT_REDIRECT_URL = "console:login"

# Login throttling (django-axes): after this many failed passwords for one account (from any address),
# or from one address (for any accounts), logins of that account, or from that address, are refused for
# this many minutes, even with the right password; a success before that resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("AIRLOCK_LOGIN_FAILURE_LIMIT", 10, minimum=1)
AIRLOCK_LOGIN_LOCKOUT_MINUTES = env_int("AIRLOCK_LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=AIRLOCK_LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "console.views.login_locked"
AXES_VERBOSE = False

# Personal access tokens (console/api_auth.py): the lifetime the console offers and the longest it allows.
AIRLOCK_TOKEN_DEFAULT_DAYS = env_int("AIRLOCK_TOKEN_DEFAULT_DAYS", 30, minimum=1)
AIRLOCK_TOKEN_MAX_DAYS = env_int("AIRLOCK_TOKEN_MAX_DAYS", 365, minimum=1)
if AIRLOCK_TOKEN_DEFAULT_DAYS > AIRLOCK_TOKEN_MAX_DAYS:
    raise ImproperlyConfigured(
        f"AIRLOCK_TOKEN_DEFAULT_DAYS={AIRLOCK_TOKEN_DEFAULT_DAYS} is above "
        f"AIRLOCK_TOKEN_MAX_DAYS={AIRLOCK_TOKEN_MAX_DAYS}."
    )
# Key guessing (console/api_auth.py): unknown or wrong API keys allowed per minute from one address, and
# per key lookup (the `ak_<lookup>` part) from anywhere, before further wrong keys get 429. A valid key
# always authenticates.
AIRLOCK_BAD_KEYS_PER_MINUTE = env_int("AIRLOCK_BAD_KEYS_PER_MINUTE", 30, minimum=1)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed, compressed names in production (run collectstatic); a missing entry falls back to
    # the plain name instead of failing the page.
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_MANIFEST_STRICT = False

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.api_auth.AgentKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "console.api_errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "console.api_parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "UNAUTHENTICATED_USER": None,
}
if DEBUG:
    REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"].append("rest_framework.renderers.BrowsableAPIRenderer")

SPECTACULAR_SETTINGS = {
    "TITLE": "Airlock API",
    "DESCRIPTION": "Control plane for AI agents' tool calls: registry, gate, approvals and traces.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "REDOC_DIST": "SIDECAR",  # templates/drf_spectacular/redoc.html: no CDN, no web fonts
}

# Ed25519 key that signs registry snapshots: PEM text or a path to a PEM file. In development an
# unset key is generated once under VAR_DIR (see lib/signing.py).
AIRLOCK_SIGNING_KEY = env_str("AIRLOCK_SIGNING_KEY")
if not AIRLOCK_SIGNING_KEY and not DEBUG:
    raise ImproperlyConfigured(
        "AIRLOCK_SIGNING_KEY must be set when DEBUG is off: an Ed25519 private key as PEM text or the path of a "
        "PEM file (see docs/operations.md)."
    )
AIRLOCK_SIGNING_KEY_FILE = VAR_DIR / "signing_key.pem"
# Encrypts values kept but never stored readable (raw arguments awaiting approval, tenant secrets).
AIRLOCK_SEALING_KEY = env_str("AIRLOCK_SEALING_KEY")

# Retention (retention/services.py, every 10 minutes through beat or run_periodic): closed runs with
# their calls, events, approvals, idempotency records and deliveries go this many days after they
# end; their approval audit rows stay, redacted, for the longer audit period. 0 keeps forever.
AIRLOCK_RUN_RETENTION_DAYS = env_int("AIRLOCK_RUN_RETENTION_DAYS", 90)
AIRLOCK_AUDIT_RETENTION_DAYS = env_int("AIRLOCK_AUDIT_RETENTION_DAYS", 365)
if AIRLOCK_AUDIT_RETENTION_DAYS and AIRLOCK_AUDIT_RETENTION_DAYS < AIRLOCK_RUN_RETENTION_DAYS:
    raise ImproperlyConfigured(
        f"AIRLOCK_AUDIT_RETENTION_DAYS={AIRLOCK_AUDIT_RETENTION_DAYS} must be 0 (kept forever) or at least "
        f"AIRLOCK_RUN_RETENTION_DAYS={AIRLOCK_RUN_RETENTION_DAYS}: the audit trail outlives the runs it records."
    )
AIRLOCK_RETENTION_BATCH_SIZE = env_int("AIRLOCK_RETENTION_BATCH_SIZE", 500, minimum=1)

# The egress guard (lib/egress.py) for every request the server makes to an address someone else chose:
# webhooks, http and MCP skills, MCP import, status checks, trace forwarding. Private, loopback, link-local
# and other non-public addresses are refused unless allowed here (on in development, so local test servers
# work); AIRLOCK_ALLOW_PRIVATE_CALLBACKS is the old, webhook-only name, kept as the default and an alias.
AIRLOCK_EGRESS_ALLOW_PRIVATE = env_bool(
    "AIRLOCK_EGRESS_ALLOW_PRIVATE", env_bool("AIRLOCK_ALLOW_PRIVATE_CALLBACKS", DEBUG)
)
AIRLOCK_ALLOW_PRIVATE_CALLBACKS = AIRLOCK_EGRESS_ALLOW_PRIVATE
# Ports those requests may use; "*" (the development default) is any port. None means any.
AIRLOCK_EGRESS_PORTS = port_list(
    "AIRLOCK_EGRESS_PORTS", env_list("AIRLOCK_EGRESS_PORTS", ["*"] if DEBUG else ["80", "443", "8080", "8443"])
)
# Host names or IP networks reachable even though private (an in-cluster collector or MCP server).
AIRLOCK_EGRESS_ALLOW_HOSTS = env_list("AIRLOCK_EGRESS_ALLOW_HOSTS", [])

# The gate (runs/): calls per minute one agent may make, and one tenant's agents of one skill unless the
# operator's AIRLOCK_RATE_LIMITS or the skill's manifest sets that (runs/ratelimit.py); and the threads
# that run adapters for one process (runs/execution.py).
AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = env_int("AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE", 1200, minimum=1)
AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE = env_int("AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE", 30000, minimum=1)
AIRLOCK_RATE_LIMITS = rate_limit_list("AIRLOCK_RATE_LIMITS", env_list("AIRLOCK_RATE_LIMITS", []))
# Decision bundles (policies/bundles.py): the longest a signed bundle lets an agent decide locally, whatever
# its tenant's admins set (a revoked agent's local decisions stop at most this long after the revocation).
AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS = env_int("AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS", 3600, minimum=30)
# A grant's page (runs/grant_revocation.py): the calls of this many past days that revoking it would have refused.
AIRLOCK_GRANT_PREVIEW_DAYS = env_int("AIRLOCK_GRANT_PREVIEW_DAYS", 7, minimum=1)

# The deployment's own in-process tools (`python:` adapters): modules whose `@register` calls declare them, and
# every installed package's `airlock.tools` entry points (runs/tool_modules.py). The demo's functions load only
# in the demo: the embedded default (no DATABASE_URL, as `make run` starts it) or AIRLOCK_DEMO=1.
AIRLOCK_TOOL_MODULES = env_list("AIRLOCK_TOOL_MODULES", [])
AIRLOCK_DEMO = env_bool("AIRLOCK_DEMO", not env_str("DATABASE_URL"))
# The sandbox executor (runs/plane/confinement.py): the bubblewrap binary that confines `confined:` tools, and
# extra directories of the deployment's tool code the sandboxed process may import from (read-only).
AIRLOCK_BWRAP = env_str("AIRLOCK_BWRAP", "bwrap")
AIRLOCK_CONFINED_CODE_PATHS = env_list("AIRLOCK_CONFINED_CODE_PATHS", [])
AIRLOCK_GATE_WORKERS = env_int("AIRLOCK_GATE_WORKERS", 16, minimum=1)
# The gate's hot statements are prepared on PostgreSQL (lib/sql_rows.hot_cursor); off behind a
# transaction-mode pooler that cannot keep prepared statements (PgBouncer before 1.21).
AIRLOCK_DB_PREPARED_STATEMENTS = env_bool("AIRLOCK_DB_PREPARED_STATEMENTS", True)
# The MCP gateway (mcp_gateway/): how long a tools/call that needs a person's approval waits, sending progress
# notifications, before it answers "approval pending" (the client then calls check_approval).
AIRLOCK_MCP_APPROVAL_WAIT_SECONDS = env_float("AIRLOCK_MCP_APPROVAL_WAIT_SECONDS", 60.0)
# Retries of transient failures of idempotent skills: equal-jitter backoff from base, doubling, capped.
AIRLOCK_RETRY_BASE_SECONDS = env_float("AIRLOCK_RETRY_BASE_SECONDS", 0.1)
AIRLOCK_RETRY_CAP_SECONDS = env_float("AIRLOCK_RETRY_CAP_SECONDS", 2.0)
# Circuit breakers (runs/plane/breakers.py): open after this many failures within the window, stay open
# for OPEN seconds, then let one probe through (a probe not answered within PROBE seconds frees its slot).
AIRLOCK_BREAKER_FAILURE_THRESHOLD = env_int("AIRLOCK_BREAKER_FAILURE_THRESHOLD", 5, minimum=1)
AIRLOCK_BREAKER_WINDOW_SECONDS = env_int("AIRLOCK_BREAKER_WINDOW_SECONDS", 60, minimum=1)
AIRLOCK_BREAKER_OPEN_SECONDS = env_float("AIRLOCK_BREAKER_OPEN_SECONDS", 30.0)
AIRLOCK_BREAKER_PROBE_SECONDS = env_int("AIRLOCK_BREAKER_PROBE_SECONDS", 30, minimum=1)
# Long-running jobs (reliability/jobs.py): first status check, then checks backing off from base
# (doubling, capped), giving up (and opening a reconciliation item) after MAX_CHECKS.
AIRLOCK_JOB_FIRST_CHECK_SECONDS = env_float("AIRLOCK_JOB_FIRST_CHECK_SECONDS", 2.0)
AIRLOCK_JOB_CHECK_BASE_SECONDS = env_float("AIRLOCK_JOB_CHECK_BASE_SECONDS", 2.0)
AIRLOCK_JOB_CHECK_CAP_SECONDS = env_float("AIRLOCK_JOB_CHECK_CAP_SECONDS", 300.0)
AIRLOCK_JOB_MAX_CHECKS = env_int("AIRLOCK_JOB_MAX_CHECKS", 30, minimum=1)
# Reconciliation (reliability/reconcile.py): the first time the tool is asked what became of a call.
AIRLOCK_RECONCILE_FIRST_CHECK_SECONDS = env_float("AIRLOCK_RECONCILE_FIRST_CHECK_SECONDS", 5.0)
# Approvals (approvals/services.py): a request pending this long (or half its TTL, if sooner) is mailed
# to the tenant's admins.
AIRLOCK_APPROVAL_ESCALATE_AFTER_MINUTES = env_int("AIRLOCK_APPROVAL_ESCALATE_AFTER_MINUTES", 15, minimum=1)
# The inbox's claims (approvals/claims.py): "alice is looking at this" lapses this long after her browser last
# renewed it (it renews a third of the way through while the page stays open).
AIRLOCK_APPROVAL_CLAIM_SECONDS = env_int("AIRLOCK_APPROVAL_CLAIM_SECONDS", 90, minimum=10)
# How often the resume of an approved call held by its agent's open-ended suspension looks again (a timed
# suspension is looked at again when it ends, or after this, whichever is sooner).
AIRLOCK_SUSPENDED_RECHECK_SECONDS = env_int("AIRLOCK_SUSPENDED_RECHECK_SECONDS", 30, minimum=1)
# Webhooks to a run's callback URL (approvals/delivery.py): per-request timeout, backoff and attempts.
AIRLOCK_WEBHOOK_TIMEOUT_SECONDS = env_float("AIRLOCK_WEBHOOK_TIMEOUT_SECONDS", 5.0, minimum=0.1)
AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS = env_float("AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS", 2.0)
AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS = env_float("AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS", 600.0)
AIRLOCK_WEBHOOK_MAX_ATTEMPTS = env_int("AIRLOCK_WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
# Deciding outside the console (approvals/slack.py, approvals/decision_links.py): how long an e-mail's
# decision link stays valid, and the only hosts a Slack interaction's response_url may name.
AIRLOCK_EMAIL_LINK_MAX_AGE_HOURS = env_int("AIRLOCK_EMAIL_LINK_MAX_AGE_HOURS", 24, minimum=1)
AIRLOCK_SLACK_RESPONSE_HOSTS = env_list("AIRLOCK_SLACK_RESPONSE_HOSTS", ["hooks.slack.com"])
# A retry scheduled with a countdown longer than the broker's visibility timeout is delivered again early.
for _name in ("AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS", "AIRLOCK_JOB_CHECK_CAP_SECONDS"):
    if globals()[_name] >= CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]:
        raise ImproperlyConfigured(
            f"{_name}={globals()[_name]:g} must be below CELERY_VISIBILITY_TIMEOUT="
            f"{CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout']}."
        )
# Trace ingest (traces/ingest.py): sizes per request, concurrent requests per process, spans per tenant
# per minute.
TRACES_INGEST_MAX_BODY_BYTES = env_int("TRACES_INGEST_MAX_BODY_BYTES", 5 * 1024 * 1024, minimum=1)
TRACES_INGEST_MAX_DECODED_BYTES = env_int("TRACES_INGEST_MAX_DECODED_BYTES", 20 * 1024 * 1024, minimum=1)
TRACES_INGEST_MAX_SPANS = env_int("TRACES_INGEST_MAX_SPANS", 10_000, minimum=1)
TRACES_INGEST_MAX_ATTRIBUTE_BYTES = env_int("TRACES_INGEST_MAX_ATTRIBUTE_BYTES", 64 * 1024, minimum=1)
TRACES_INGEST_MAX_INFLIGHT = env_int("TRACES_INGEST_MAX_INFLIGHT", 8, minimum=1)
TRACES_INGEST_SPANS_PER_MINUTE = env_int("TRACES_INGEST_SPANS_PER_MINUTE", 600_000, minimum=1)

# Alert e-mail. While DEBUG is on (the demo), each message is a file under VAR_DIR/mail rather than a screenful
# of the console; otherwise the console backend prints it to the log. Production uses SMTP.
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.filebased.EmailBackend" if DEBUG else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_FILE_PATH = VAR_DIR / "mail"
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "airlock@localhost")

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Every console page: no inline script or style, nothing loaded from elsewhere, never framed
# (console/csp.py adds ws(s)://<this host> to connect-src; templates keep script and CSS in static/).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
    }
}
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    # Airlock runs behind a TLS-terminating proxy that sets X-Forwarded-Proto (docs/operations.md).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
# uvicorn's access log (the stream process, `serve --dev` and the embedded process): one line per request.
AIRLOCK_ACCESS_LOG = env_bool("AIRLOCK_ACCESS_LOG", False)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every handler masks secrets (lib.log_redaction): request lines with query strings, messages, tracebacks.
    "filters": {"mask_secrets": {"()": "lib.log_redaction.MaskSecretsFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "access": {
            "()": "uvicorn.logging.AccessFormatter",
            "fmt": '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["mask_secrets"]},
        "access": {
            "class": "logging.StreamHandler",
            "formatter": "access",
            "stream": "ext://sys.stdout",
            "filters": ["mask_secrets"],
        },
    },
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", LOG_LEVELS)},
    # httpx logs every request at INFO: the simulated agents and webhooks would drown the console.
    # uvicorn's access log, as uvicorn writes it, through the masking filter, only with AIRLOCK_ACCESS_LOG=1
    # (Django configures logging after uvicorn does, when the app is imported, so this, not uvicorn's
    # --no-access-log, is the configuration in effect). Without a broker (eager tasks) kombu warns on every
    # task that no hostname was supplied.
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "uvicorn.access": {
            "handlers": ["access"],
            "level": "INFO" if AIRLOCK_ACCESS_LOG else "WARNING",
            "propagate": False,
        },
        **({} if REDIS_URL else {"kombu.connection": {"level": "ERROR"}}),
    },
}
