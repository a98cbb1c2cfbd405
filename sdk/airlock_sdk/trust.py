"""What the SDK trusts about one control plane, kept apart from the snapshot cache.

The trust file holds the Ed25519 public key pinned on first use (when the app pins none by
configuration), the highest snapshot number accepted, and the audience (tenant, agent key
lookup) the accepted snapshots named. It lives in its own directory (`AIRLOCK_TRUST_DIR`,
default `$XDG_CONFIG_HOME/airlock-sdk` or `~/.config/airlock-sdk`), never in the cache
directory, and nothing read from a cache file is ever written into it: a planted cache file
cannot bring its own key or lower the number.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airlock_sdk.errors import SnapshotVerificationError

PUBLIC_KEY_ENV = "AIRLOCK_PUBLIC_KEY"
TRUST_DIR_ENV = "AIRLOCK_TRUST_DIR"
TENANT_ENV = "AIRLOCK_TENANT"


def default_trust_dir() -> Path:
    if os.environ.get(TRUST_DIR_ENV):
        return Path(os.environ[TRUST_DIR_ENV])
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "airlock-sdk"


def configured_public_key(explicit: str | None = None) -> str | None:
    """The key pinned by configuration: the constructor's argument, else `AIRLOCK_PUBLIC_KEY`
    (PEM text, newlines may be written `\\n`, or the path of a PEM file)."""
    value = (explicit or os.environ.get(PUBLIC_KEY_ENV) or "").strip()
    if not value:
        return None
    if value.startswith("-----BEGIN"):
        return value.replace("\\n", "\n")
    path = Path(value).expanduser()
    if not path.is_file():
        raise SnapshotVerificationError(
            f"{PUBLIC_KEY_ENV} names {path}, which is not a file (give PEM text or the path of a PEM file)."
        )
    return path.read_text()


def key_lookup_of(api_key: str) -> str:
    """The lookup part of an agent key `ak_<lookup>_<secret>`: what the server signs as the audience."""
    parts = api_key.split("_", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "ak" else ""


@dataclass
class TrustState:
    """The contents of one trust file."""

    public_key_pem: str | None = None
    highest_number: int = 0
    audience: dict[str, Any] = field(default_factory=dict)


class TrustStore:
    """One control plane's (base URL + agent) trust file: read once, rewritten atomically on change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: str = ""  # set when the file exists but cannot be read: nothing is trusted then
        self.state = TrustState()
        try:
            data = json.loads(path.read_text())
            self.state = TrustState(
                public_key_pem=data.get("public_key_pem") or None,
                highest_number=int(data.get("highest_number") or 0),
                audience=dict(data.get("audience") or {}),
            )
        except FileNotFoundError:
            pass
        except (ValueError, TypeError, AttributeError, OSError) as exc:
            self.error = (
                f"The trust file {path} is unreadable ({exc}); no snapshot is trusted until it is "
                "repaired or deliberately removed (removing it re-pins the key on first use)."
            )

    def check_readable(self) -> None:
        if self.error:
            raise SnapshotVerificationError(self.error)

    def save(self) -> None:
        self.check_readable()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-trust-")
        with os.fdopen(fd, "w") as handle:
            json.dump(self.state.__dict__, handle, indent=1)
        os.replace(tmp, self.path)
