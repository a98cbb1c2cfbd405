"""The ASGI application: what streams (the approvals websocket, a run's events long poll, /mcp), served by
uvicorn behind the front door (airlock/serving.py). Every other request goes to the WSGI workers
(airlock/wsgi.py); in the embedded default (`make run`, no REDIS_URL) this one process serves everything,
because the in-memory channel layer lives in one process."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django_asgi_app = get_asgi_application()  # Django's own handler; sets Django up before the imports below

# Imported only after Django is set up: consumers touch models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from airlock.routing import refuse_other_paths, websocket_urlpatterns  # noqa: E402
from console.ws_origin import ExactOriginValidator  # noqa: E402
from lib.tokens import warm_in_background  # noqa: E402
from mcp_gateway.asgi import with_mcp  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": with_mcp(django_asgi_app),  # /mcp: Airlock as an MCP server (mcp_gateway/)
        "websocket": ExactOriginValidator(AuthMiddlewareStack(URLRouter([*websocket_urlpatterns, refuse_other_paths]))),
    }
)
warm_in_background()  # result tokens are counted on every call through /mcp too (lib/tokens.py)
