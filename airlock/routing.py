"""Websocket routes of every app, collected in one list for airlock.asgi."""

from channels.security.websocket import WebsocketDenier
from django.urls import re_path

from approvals.routing import websocket_urlpatterns as approval_routes

websocket_urlpatterns = [*approval_routes]

# Last in airlock.asgi's router: a socket to any other path (a typo, a NUL) is refused with a 403 instead of
# Channels' router raising "No route found", which the server answers with a 500.
refuse_other_paths = re_path(r"", WebsocketDenier.as_asgi())
