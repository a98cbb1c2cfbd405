"""Settings for the throughput benchmark's live server (bench/throughput.py): the gate benchmark's
settings (the real ones, rate limits out of the way) plus a bare endpoint to compare the gate with.

The `bench` package becomes an app only here, so that the bare endpoint's model (bench/throughput_urls.py)
has an app label without touching any migration of the project's own apps.
"""

from bench.gate_settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench"]  # noqa: F405
ROOT_URLCONF = "bench.throughput_urls"
