"""Before any management command: a PostgreSQL database that does not exist ends in one line that names it and
the command creating it, instead of the connection pool's retries and a long traceback.

Only that one failure is answered here; anything else (a server down, a wrong password) goes on to Django,
which reports it as before.
"""

from __future__ import annotations

import sys

from django.conf import settings


def missing_database_message(database: dict) -> str | None:
    """The line to print when `database` (a DATABASES entry) names a PostgreSQL database that does not exist."""
    if not database["ENGINE"].endswith("postgresql"):
        return None
    import psycopg

    host, port, user = database.get("HOST") or "localhost", str(database.get("PORT") or 5432), database.get("USER")
    params = {
        "dbname": database["NAME"],
        "host": host,
        "port": port,
        "user": user,
        "password": database.get("PASSWORD"),
    }
    try:
        psycopg.connect(**{key: value for key, value in params.items() if value}, connect_timeout=5).close()
    except psycopg.OperationalError as error:
        if f'database "{database["NAME"]}" does not exist' not in str(error):
            return None
        create = f"createdb -h {host} -p {port}{f' -U {user}' if user else ''} {database['NAME']}"
        return (
            f'DATABASE_URL names the PostgreSQL database "{database["NAME"]}" on {host}:{port}, which does not '
            f"exist; create it with: {create}"
        )
    return None


def exit_if_database_missing() -> None:
    message = missing_database_message(settings.DATABASES["default"])
    if message:
        sys.exit(message)
