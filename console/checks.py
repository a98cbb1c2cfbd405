"""System checks that catch a bad deployment at start-up (`manage.py check --deploy`)."""

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

from lib.signing import signing_key


@register("airlock", deploy=True)
def check_signing_key(app_configs, **kwargs) -> list[Error]:
    """A configured AIRLOCK_SIGNING_KEY must load; an unset one is generated in development."""
    if not settings.AIRLOCK_SIGNING_KEY:
        return []

    signing_key.cache_clear()
    try:
        signing_key()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint="See docs/operations.md, 'Snapshot signing key'.", id="airlock.E001")]
    return []
