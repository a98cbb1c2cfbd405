"""The physical anchor of the throughput bench: a minimal Django app (these settings and
bench/minimal_urls.py) serving only the bare endpoint (bench/bare.py) with no middleware, on the same database (the same
psycopg pool) and under the same WSGI server as the project. What the project's bare endpoint loses against
it is serving and middleware overhead; nothing else differs.

Served with `granian --interface wsgi --factory django.core.wsgi:get_wsgi_application` and
DJANGO_SETTINGS_MODULE=bench.minimal_settings.
"""

import os

from console.env import database_from_url

DEBUG = False
SECRET_KEY = os.environ.get("SECRET_KEY", "bench-minimal-" + "x" * 40)
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["bench"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.minimal_urls"
DATABASES = {"default": database_from_url(os.environ["DATABASE_URL"])}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
