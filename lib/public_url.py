"""Absolute URLs for outsiders (a long-running tool's callback, a link in an e-mail): AIRLOCK_PUBLIC_URL
plus a path, never the Host header of some request (a Celery task has none, and a client chooses it)."""

from django.conf import settings
from django.urls import reverse


def public_url(path: str) -> str:
    """`path` (starting with /) under AIRLOCK_PUBLIC_URL, which may itself end in a path prefix."""
    return settings.AIRLOCK_PUBLIC_URL.rstrip("/") + path


def public_reverse(viewname: str, *, args: list | None = None) -> str:
    return public_url(reverse(viewname, args=args))
