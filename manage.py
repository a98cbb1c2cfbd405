#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    from airlock.database_check import exit_if_database_missing

    exit_if_database_missing()
    execute_from_command_line(sys.argv)
