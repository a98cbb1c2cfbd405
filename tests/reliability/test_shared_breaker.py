"""With Redis, a breaker is one breaker for every process: counts, opening, the single probe, closing."""

import os
import subprocess
import sys
import uuid

import pytest

from lib import clock as airlock_clock
from runs.errors import Unavailable
from runs.plane import breakers

pytestmark = pytest.mark.redis
# The other processes get the breaker settings from their environment, as a deployment does.
CONFIG = {
    "AIRLOCK_BREAKER_FAILURE_THRESHOLD": "3",
    "AIRLOCK_BREAKER_WINDOW_SECONDS": "30",
    "AIRLOCK_BREAKER_OPEN_SECONDS": "30",
    "AIRLOCK_BREAKER_PROBE_SECONDS": "20",
}
SCRIPT = """
import sys, django
django.setup()
from lib import clock
clock.advance(float(sys.argv[4]))  # this process's clock agrees with the test's
from runs.plane import breakers
domain, action, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
closed = breakers.Admission("closed", probe=False)
if action == "fail":
    opened = sum(len(breakers.record_failure(domain, closed, reason="test")) for _ in range(count))
    print(opened)
elif action == "probe":
    print(breakers.admit(domain).probe)
elif action == "succeed":
    print(len(breakers.record_success(domain, breakers.Admission("half_open", probe=True))))
"""


def other_process(domain: str, action: str, count: int = 1) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings", **CONFIG}
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, domain, action, str(count), str(airlock_clock.offset())],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result_of(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out.strip()


def test_breaker_is_shared_by_processes(settings, clock):
    for name, value in CONFIG.items():
        setattr(settings, name, int(value))
    domain = f"https://shared-{uuid.uuid4().hex[:8]}.example.com"
    # Two processes fail at once, two failures each: the shared count crosses 3 and one of them opens it.
    first, second = other_process(domain, "fail", 2), other_process(domain, "fail", 2)
    assert sorted([result_of(first), result_of(second)]) == ["0", "1"]
    assert breakers.state_of(domain) == "open"
    with pytest.raises(Unavailable) as fast:
        breakers.admit(domain)
    assert fast.value.code == "circuit_open"

    clock.advance(settings.AIRLOCK_BREAKER_OPEN_SECONDS)
    assert result_of(other_process(domain, "probe")) == "True"  # the other process holds the one probe
    with pytest.raises(Unavailable) as waiting:
        breakers.admit(domain)
    assert waiting.value.code == "circuit_half_open"
    assert result_of(other_process(domain, "succeed")) == "1"
    assert breakers.state_of(domain) == "closed"
    assert breakers.admit(domain).state == "closed"
