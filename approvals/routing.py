from django.urls import path

from approvals.consumers import ApprovalsConsumer

websocket_urlpatterns = [path("ws/approvals/", ApprovalsConsumer.as_asgi())]
