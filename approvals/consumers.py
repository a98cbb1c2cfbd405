"""The approver inbox's websocket: small typed hints that a request changed, per tenant group."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from approvals.broadcast import tenant_group
from console.models import Role
from console.tenancy import tenant_ids_for


class ApprovalsConsumer(AsyncJsonWebsocketConsumer):
    """Joins one group per tenant in which the user is an approver; never another tenant's."""

    groups_joined: list[str]

    async def connect(self) -> None:
        self.groups_joined = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        tenant_ids = await database_sync_to_async(tenant_ids_for)(user, Role.APPROVER)
        for tenant_id in sorted(tenant_ids):
            group = tenant_group(tenant_id)
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.append(group)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        """The socket is one-way; the browser decides through ordinary POSTs with CSRF."""

    async def approval_changed(self, event: dict) -> None:
        await self.send_json({"type": "approval.changed", "approval_id": event["approval_id"],
                              "tenant": event["tenant"], "status": event["status"]})
