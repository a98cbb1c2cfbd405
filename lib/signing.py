"""Ed25519 signing of registry snapshots.

The private key comes from AIRLOCK_SIGNING_KEY (PEM text or a path to a PEM file). In
development, when it is unset, one is generated once under VAR_DIR and its path is logged.
Rotation is described in docs/operations.md; `key_id()` names the key in each snapshot.
"""

import base64
import hashlib
import logging
from functools import cache
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)


def _load_pem(pem: bytes) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except ValueError as exc:
        raise ImproperlyConfigured(f"AIRLOCK_SIGNING_KEY is not a readable PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ImproperlyConfigured("AIRLOCK_SIGNING_KEY must be an Ed25519 private key.")
    return key


def _generate_development_key(path: Path) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.write_bytes(pem)
    path.chmod(0o600)
    logger.warning("Generated a development snapshot signing key at %s (set AIRLOCK_SIGNING_KEY in production).", path)
    return key


@cache
def signing_key() -> Ed25519PrivateKey:
    configured = settings.AIRLOCK_SIGNING_KEY.strip()
    if configured.startswith("-----BEGIN"):
        # Platforms that cannot hold multi-line variables pass the PEM with literal "\n".
        return _load_pem(configured.replace("\\n", "\n").encode())
    if configured:
        path = Path(configured)
        if not path.is_file():
            raise ImproperlyConfigured(f"AIRLOCK_SIGNING_KEY names {path}, which is not a file.")
        return _load_pem(path.read_bytes())
    path = Path(settings.AIRLOCK_SIGNING_KEY_FILE)
    if path.is_file():
        return _load_pem(path.read_bytes())
    return _generate_development_key(path)


def public_key_pem() -> str:
    public = signing_key().public_key()
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def key_id() -> str:
    """A short, stable name for the current key, so verifiers can tell rotations apart."""
    raw = signing_key().public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def key_id_of(public_pem: str) -> str:
    """`key_id()` of another key, given its PEM public key (an earlier key kept for verifying)."""
    public = serialization.load_pem_public_key(public_pem.encode())
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def sign(payload: bytes) -> str:
    return base64.b64encode(signing_key().sign(payload)).decode()


def verify(payload: bytes, signature_b64: str, public_pem: str | None = None) -> bool:
    public = serialization.load_pem_public_key(public_pem.encode()) if public_pem else signing_key().public_key()
    if not isinstance(public, Ed25519PublicKey):
        return False
    try:
        public.verify(base64.b64decode(signature_b64), payload)
    except (InvalidSignature, ValueError):
        return False
    return True
