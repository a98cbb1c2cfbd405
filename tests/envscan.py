"""The environment variables Airlock's settings read, found by scanning console/settings.py.

Settings read the environment only through the console.env helpers, always with the variable
name as a string literal, so a scan of the source finds every one of them.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_FILE = ROOT / "console" / "settings.py"
ENV_CALL = re.compile(r"""\benv_(?:str|bool|int|float|list|choice|url)\(\s*["']([A-Z][A-Z0-9_]*)["']""")


def settings_env_names() -> set[str]:
    return set(ENV_CALL.findall(SETTINGS_FILE.read_text()))


def clean_environ(base: dict[str, str], **overrides: str) -> dict[str, str]:
    """`base` without any variable the settings read, plus `overrides`. The suite asks for the demo's tools
    (tests/conftest.py), so the processes it starts do too unless `overrides` say otherwise."""
    names = settings_env_names()
    env = {key: value for key, value in base.items() if key not in names}
    env["AIRLOCK_DEMO"] = "1"
    env.update(overrides)
    return env
