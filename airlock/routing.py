"""Websocket routes of every app, collected in one list for airlock.asgi."""

from approvals.routing import websocket_urlpatterns as approval_routes

websocket_urlpatterns = [*approval_routes]
