"""A DATABASE_URL naming a PostgreSQL database that does not exist: one line naming it and the command that
creates it, not the pool's retries and a traceback (issue 44)."""

import os
import subprocess
import sys
import uuid

import pytest
from django.conf import settings

from tests.envscan import ROOT, clean_environ


@pytest.mark.postgres
def test_a_missing_database_is_one_line_naming_it_and_how_to_create_it():
    database = settings.DATABASES["default"]
    name = f"airlock_missing_{uuid.uuid4().hex[:8]}"
    host, port = database["HOST"] or "localhost", database["PORT"] or 5432
    credentials = database["USER"] + (f":{database['PASSWORD']}" if database["PASSWORD"] else "")
    env = clean_environ(os.environ, DATABASE_URL=f"postgres://{credentials}@{host}:{port}/{name}")
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f'database "{name}"' in lines[0] and f"createdb -h {host} -p {port}" in lines[0] and lines[0].endswith(name)


def test_other_databases_are_left_to_django(settings):
    from airlock.database_check import missing_database_message

    assert missing_database_message({"ENGINE": "django.db.backends.sqlite3", "NAME": "/nowhere/x.sqlite3"}) is None
