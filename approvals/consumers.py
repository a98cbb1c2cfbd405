"""The approver inbox's websocket: small typed hints that a request changed, per tenant group.

A request routed to an approver group is forwarded only to the sockets of users it is routed to (or of the
tenant's admins), as `ApprovalRequest.objects.routed_to` decides when the hint arrives.

The browser sends one kind of message back: which card its person is working ("claim", "release";
approvals.claims), which the socket checks, records and tells the tenant's other approvers as
`approval.claimed`, under the same routing rule. Claims a socket holds end when it closes.

Access is checked again before every message is forwarded, not only at connect: a socket whose
session ended (logout, expiry, password change) closes with SESSION_ENDED, one whose user lost the
approver role in a tenant it listens to closes with ROLE_LOST, and the event is not sent.
"""

from importlib import import_module

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.base import SessionBase
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.db import connection
from django.db.models import Subquery, Value
from django.db.models.functions import Now
from django.utils.crypto import constant_time_compare

from approvals.broadcast import ClaimChanged, claim_changed, tenant_group
from approvals.claims import claim_approval, release_claim
from approvals.models import ApprovalRequest
from console.models import Role
from console.tenancy import tenant_ids_for, tenants_covered

NOT_LOGGED_IN = 4401
SESSION_ENDED = 4401  # the same as at connect: the browser must log in again before reconnecting
ROLE_LOST = 4403


def _stored_session(store: SessionBase) -> Subquery | None:
    """The session's data as its database row has it when the query runs, as a subquery, when the session
    engine keeps its sessions in the database (Django's db and cached_db engines; read past any cache)."""
    if not isinstance(store, DatabaseSessionStore):
        return None
    rows = store.get_model_class().objects.filter(session_key=store.session_key, expire_date__gt=Now())
    return Subquery(rows.values("session_data")[:1])


class AccessCheck:
    """Whether one socket may still receive its tenants' events: one query before every message.

    The query reads the user if still active, the session's row if it has not expired or been deleted, and
    in how many of the socket's tenants the user is still an approver. A socket's session, user and tenants
    never change, so its SQL is compiled once, at connect: building a queryset cost more than running it,
    on the workers' one database thread that every socket's check shares."""

    def __init__(self, session_key: str | None, user_id: int, tenant_ids: set[int]) -> None:
        self.store = import_module(settings.SESSION_ENGINE).SessionStore(session_key) if session_key else None
        self.tenant_ids = tenant_ids
        self.sql = None
        if self.store is None or self.store.session_key is None:
            return
        stored = _stored_session(self.store)
        self.reads_session = stored is not None
        users = get_user_model().objects.filter(pk=user_id, is_active=True).order_by()
        users = users.annotate(
            covered=tenants_covered(Role.APPROVER, tenant_ids),
            stored_session=Value("") if stored is None else stored,
        )
        self.user_model, self.user_id = users.model, user_id
        self.sql, self.params = users.values_list("password", "covered", "stored_session").query.sql_with_params()
        self._decoded: tuple[str, dict] | None = None

    def refusal(self) -> int | None:
        """The close code if the socket may no longer receive its tenants' events, else None."""
        if self.sql is None:
            return SESSION_ENDED
        with connection.cursor() as cursor:
            cursor.execute(self.sql, self.params)
            row = cursor.fetchone()
        if row is None:
            return SESSION_ENDED
        password, covered, stored_session = row
        if self.reads_session and stored_session is None:
            return SESSION_ENDED
        user = self.user_model(pk=self.user_id, password=password)
        if not _logs_in(self._session_data(stored_session), user):
            return SESSION_ENDED
        if covered < len(self.tenant_ids):
            return ROLE_LOST
        return None

    def _session_data(self, stored_session: str) -> dict:
        if not self.reads_session:
            return self.store.load()
        if self._decoded is None or self._decoded[0] != stored_session:  # decoded again only when it changed
            self._decoded = (stored_session, self.store.decode(stored_session))
        return self._decoded[1]


def _logs_in(data: dict, user) -> bool:
    """Whether this session's data still logs `user` in (as django.contrib.auth.get_user decides)."""
    return (
        str(data.get(SESSION_KEY)) == str(user.pk)
        and BACKEND_SESSION_KEY in data
        and constant_time_compare(data.get(HASH_SESSION_KEY, ""), user.get_session_auth_hash())
    )


def _connect_check(user, session_key: str | None) -> AccessCheck:
    return AccessCheck(session_key, user.pk, tenant_ids_for(user, Role.APPROVER))


class ApprovalsConsumer(AsyncJsonWebsocketConsumer):
    """Joins one group per tenant in which the user is an approver; never another tenant's."""

    groups_joined: list[str]
    tenant_ids: set[int]
    claimed: set[int]

    async def connect(self) -> None:
        self.groups_joined, self.tenant_ids, self.claimed = [], set(), set()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_LOGGED_IN)
            return
        session = self.scope.get("session")
        self.access = await database_sync_to_async(_connect_check)(user, getattr(session, "session_key", None))
        self.tenant_ids = self.access.tenant_ids
        for tenant_id in sorted(self.tenant_ids):
            group = tenant_group(tenant_id)
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.append(group)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for approval_id in sorted(self.claimed):  # she left: her cards are free again
            released = await database_sync_to_async(self._release)(approval_id)
            if released is not None:
                await claim_changed(*released)
        self.claimed = set()
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = []

    async def receive_json(self, content, **kwargs) -> None:
        """Only claims come this way ({"type": "claim" | "release", "approval_id": 42}); the browser decides
        through ordinary POSTs with CSRF."""
        kind = content.get("type") if isinstance(content, dict) else None
        approval_id = content.get("approval_id") if isinstance(content, dict) else None
        if kind not in ("claim", "release") or type(approval_id) is not int:
            return
        if not await self._still_allowed():
            return
        handler = self._claim if kind == "claim" else self._release
        changed = await database_sync_to_async(handler)(approval_id)
        if changed is not None:
            await claim_changed(*changed)

    def _claimable(self, approval_id: int) -> ApprovalRequest | None:
        queryset = ApprovalRequest.objects.select_related("tenant", "group")
        return queryset.filter(pk=approval_id, tenant_id__in=self.tenant_ids).first()

    def _claim(self, approval_id: int) -> tuple[int, ClaimChanged] | None:
        approval = self._claimable(approval_id)
        claim = claim_approval(approval=approval, user=self.scope["user"]) if approval is not None else None
        if claim is None:
            return None
        if claim.user_id == self.scope["user"].pk:
            self.claimed.add(approval_id)
        message = ClaimChanged(
            approval_id=approval_id,
            tenant=approval.tenant.slug,
            by=claim.username,
            expires_at=claim.expires_at.isoformat(),
            routed=approval.group_id is not None,
        )
        return approval.tenant_id, message

    def _release(self, approval_id: int) -> tuple[int, ClaimChanged] | None:
        self.claimed.discard(approval_id)
        approval = self._claimable(approval_id)
        if approval is None or not release_claim(approval_id=approval_id, user=self.scope["user"]):
            return None
        message = ClaimChanged(
            approval_id=approval_id, tenant=approval.tenant.slug, by="", routed=approval.group_id is not None
        )
        return approval.tenant_id, message

    def _routed_here(self, approval_id: int) -> bool:
        user = self.scope["user"]
        return ApprovalRequest.objects.routed_to(user, everything=True).filter(pk=approval_id).exists()

    async def _still_allowed(self) -> bool:
        code = await database_sync_to_async(self.access.refusal)()
        if code is None:
            return True
        await self.disconnect(code)  # leave the groups now: nothing more is even delivered to this channel
        await self.close(code=code)
        return False

    async def approval_changed(self, event: dict) -> None:
        if not await self._still_allowed():
            return
        if event.get("routed") and not await database_sync_to_async(self._routed_here)(event["approval_id"]):
            return  # routed to a group this user is not in (and not in a tenant they administer)
        await self.send_json(
            {
                "type": "approval.changed",
                "approval_id": event["approval_id"],
                "tenant": event["tenant"],
                "status": event["status"],
            }
        )

    async def approval_claimed(self, event: dict) -> None:
        if not await self._still_allowed():
            return
        if event.get("routed") and not await database_sync_to_async(self._routed_here)(event["approval_id"]):
            return
        await self.send_json(
            {
                "type": "approval.claimed",
                "approval_id": event["approval_id"],
                "tenant": event["tenant"],
                "by": event["by"],
                "expires_at": event["expires_at"],
            }
        )
