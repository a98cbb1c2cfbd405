import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from airlock.web_process import PooledThreadsASGIHandler, tune_garbage_collection  # noqa: E402

django_asgi_app = PooledThreadsASGIHandler()

# Imported only after Django is set up: consumers touch models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from airlock.routing import refuse_other_paths, websocket_urlpatterns  # noqa: E402
from console.ws_origin import ExactOriginValidator  # noqa: E402
from mcp_gateway.asgi import with_mcp  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": with_mcp(django_asgi_app),  # /mcp: Airlock as an MCP server (mcp_gateway/)
        "websocket": ExactOriginValidator(AuthMiddlewareStack(URLRouter([*websocket_urlpatterns, refuse_other_paths]))),
    }
)

tune_garbage_collection()  # last: everything imported above lives as long as the process
