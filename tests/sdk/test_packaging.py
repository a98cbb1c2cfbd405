"""The SDK is its own distribution: it must import without Django or the server's packages."""

import subprocess
import sys


def test_the_sdk_imports_without_django_or_the_server():
    code = (
        "import sys, airlock_sdk, airlock_sdk.webhooks, airlock_sdk.snapshots, airlock_sdk.fencing, "
        "airlock_sdk.policy.engine, airlock_sdk.local, airlock_sdk.bundles, airlock_sdk.spool; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'rest_framework', 'console', 'runs', 'registry', 'lib', 'rfc8785'}); print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}, cwd="/"
    )
    assert out.stdout.strip() == "[]"
