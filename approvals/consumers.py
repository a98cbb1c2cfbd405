"""The approver inbox's websocket: small typed hints that a request changed, per tenant group.

Access is checked again before every message is forwarded, not only at connect: a socket whose
session ended (logout, expiry, password change) closes with SESSION_ENDED, one whose user lost the
approver role in a tenant it listens to closes with ROLE_LOST, and the event is not sent.
"""

from importlib import import_module

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.utils.crypto import constant_time_compare

from approvals.broadcast import tenant_group
from console.models import Role
from console.tenancy import tenant_ids_for

NOT_LOGGED_IN = 4401
SESSION_ENDED = 4401  # the same as at connect: the browser must log in again before reconnecting
ROLE_LOST = 4403


def _live_user(session_key: str | None, user_id: int):
    """The session's user as the database has it now, or None when the session no longer logs them in."""
    if not session_key:
        return None
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
    if str(data.get(SESSION_KEY)) != str(user_id) or BACKEND_SESSION_KEY not in data:
        return None
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None or not constant_time_compare(data.get(HASH_SESSION_KEY, ""), user.get_session_auth_hash()):
        return None
    return user


def _refusal(session_key: str | None, user_id: int, tenant_ids: set[int]) -> int | None:
    """The close code if this socket may no longer receive its tenants' events, else None."""
    user = _live_user(session_key, user_id)
    if user is None:
        return SESSION_ENDED
    if not tenant_ids <= tenant_ids_for(user, Role.APPROVER):
        return ROLE_LOST
    return None


class ApprovalsConsumer(AsyncJsonWebsocketConsumer):
    """Joins one group per tenant in which the user is an approver; never another tenant's."""

    groups_joined: list[str]
    tenant_ids: set[int]

    async def connect(self) -> None:
        self.groups_joined, self.tenant_ids = [], set()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_LOGGED_IN)
            return
        self.tenant_ids = await database_sync_to_async(tenant_ids_for)(user, Role.APPROVER)
        for tenant_id in sorted(self.tenant_ids):
            group = tenant_group(tenant_id)
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.append(group)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = []

    async def receive_json(self, content, **kwargs) -> None:
        """The socket is one-way; the browser decides through ordinary POSTs with CSRF."""

    async def _still_allowed(self) -> bool:
        session = self.scope.get("session")
        code = await database_sync_to_async(_refusal)(
            getattr(session, "session_key", None), self.scope["user"].pk, self.tenant_ids
        )
        if code is None:
            return True
        await self.disconnect(code)  # leave the groups now: nothing more is even delivered to this channel
        await self.close(code=code)
        return False

    async def approval_changed(self, event: dict) -> None:
        if not await self._still_allowed():
            return
        await self.send_json(
            {
                "type": "approval.changed",
                "approval_id": event["approval_id"],
                "tenant": event["tenant"],
                "status": event["status"],
            }
        )
