"""Symmetric sealing of values that must be kept but never stored readable: raw tool arguments
waiting for approval and tenant credentials. The key derives from AIRLOCK_SEALING_KEY, or
SECRET_KEY when that is unset.
"""

import base64
import hashlib
import json
from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@cache
def _fernet() -> Fernet:
    material = settings.AIRLOCK_SEALING_KEY or settings.SECRET_KEY
    key = base64.urlsafe_b64encode(hashlib.sha256(f"airlock-sealing:{material}".encode()).digest())
    return Fernet(key)


def seal(value: Any) -> str:
    return _fernet().encrypt(json.dumps(value, separators=(",", ":")).encode()).decode()


def unseal(token: str) -> Any:
    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except InvalidToken:
        raise ValueError("The sealed value cannot be opened with this deployment's key.") from None
