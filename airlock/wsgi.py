"""The WSGI application: every synchronous request (agent API, console pages, approver API, OTLP ingest),
served by Granian (`granian --interface wsgi airlock.wsgi:application`). What streams (the approvals
websocket, the run-events long poll, /mcp) is served by airlock.asgi; the front door routes by path."""

import os

from django.core.wsgi import get_wsgi_application

from airlock.forwarded import DEFAULT_TRUSTED, ForwardedFor, TrustedProxies
from lib.tokens import warm_in_background

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

application = ForwardedFor(
    get_wsgi_application(), TrustedProxies(os.environ.get("FORWARDED_ALLOW_IPS", DEFAULT_TRUSTED))
)
warm_in_background()  # result tokens are counted on every call (lib/tokens.py)
