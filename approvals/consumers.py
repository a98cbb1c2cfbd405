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

import asyncio
import weakref
from collections import defaultdict
from importlib import import_module

from channels.consumer import get_handler_name
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
        self._decoded: tuple[str, dict] | None = None
        self._hashed: tuple[str, str] | None = None
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

    def refusal(self) -> int | None:
        """The close code if the socket may no longer receive its tenants' events, else None."""
        if self.sql is None:
            return SESSION_ENDED
        with connection.cursor() as cursor:
            cursor.execute(self.sql, self.params)
            row = cursor.fetchone()
        return self._verdict(row)

    def _verdict(self, row: tuple | None) -> int | None:
        """The close code given this socket's (password, covered, stored session) row as the database has it
        now, or None for a user that is gone or inactive."""
        if row is None:
            return SESSION_ENDED
        password, covered, stored_session = row
        if self.reads_session and stored_session is None:
            return SESSION_ENDED
        if not _logs_in(self._session_data(stored_session), self.user_id, self._auth_hash(password)):
            return SESSION_ENDED
        if covered < len(self.tenant_ids):
            return ROLE_LOST
        return None

    def _auth_hash(self, password: str) -> str:
        """The user's session auth hash, an HMAC of the password hash as it is now: computed again only when
        that changed (a hundred sockets' HMACs and user instances were a third of a batch's time)."""
        if self._hashed is None or self._hashed[0] != password:
            user = self.user_model(pk=self.user_id, password=password)
            self._hashed = (password, user.get_session_auth_hash())
        return self._hashed[1]

    def _session_data(self, stored_session: str) -> dict:
        if not self.reads_session:
            return self.store.load()
        if self._decoded is None or self._decoded[0] != stored_session:  # decoded again only when it changed
            self._decoded = (stored_session, self.store.decode(stored_session))
        return self._decoded[1]


def _logs_in(data: dict, user_id: int, auth_hash: str) -> bool:
    """Whether this session's data still logs the user in (as django.contrib.auth.get_user decides), given
    the user's session auth hash now."""
    return (
        str(data.get(SESSION_KEY)) == str(user_id)
        and BACKEND_SESSION_KEY in data
        and constant_time_compare(data.get(HASH_SESSION_KEY, ""), auth_hash)
    )


def refusals(checks: list[AccessCheck]) -> list[int | None]:
    """`check.refusal()` for many sockets at once, in a fixed number of statements however many there are:
    the rows of their sessions (one statement) and of their users with the roles they still hold (one per
    distinct set of tenants, usually one). Each socket is judged on its own session key, user and tenants,
    exactly as `refusal` judges it; only the round trips are shared."""
    live = [check for check in checks if check.sql is not None]
    sessions: dict[str, str] = {}
    in_database = [check for check in live if check.reads_session]
    if in_database:
        keys = {check.store.session_key for check in in_database}
        rows = in_database[0].store.get_model_class().objects.filter(session_key__in=keys, expire_date__gt=Now())
        sessions = dict(rows.values_list("session_key", "session_data"))
    users: dict[tuple[frozenset[int], int], tuple[str, int]] = {}
    by_tenants: dict[frozenset[int], set[int]] = defaultdict(set)
    for check in live:
        by_tenants[frozenset(check.tenant_ids)].add(check.user_id)
    for tenant_ids, user_ids in by_tenants.items():
        rows = get_user_model().objects.filter(pk__in=user_ids, is_active=True).order_by()
        rows = rows.annotate(covered=tenants_covered(Role.APPROVER, set(tenant_ids)))
        for pk, password, covered in rows.values_list("pk", "password", "covered"):
            users[(tenant_ids, pk)] = (password, covered)
    verdicts: list[int | None] = []
    for check in checks:
        if check.sql is None:
            verdicts.append(SESSION_ENDED)
            continue
        user = users.get((frozenset(check.tenant_ids), check.user_id))
        stored = sessions.get(check.store.session_key) if check.reads_session else ""
        verdicts.append(check._verdict(None if user is None else (*user, stored)))
    return verdicts


class RoutedCheck:
    """Whether a request routed to an approver group is routed to this socket's user, as
    `ApprovalRequest.objects.routed_to(user, everything=True)` decides when the hint arrives. The queryset is
    built once, at connect (building it took about 4 ms, ten times running it); each hint runs it for the
    request's id, so what it reads (groups, roles) is read as of the hint."""

    def __init__(self, user) -> None:
        self.routed = ApprovalRequest.objects.routed_to(user, everything=True).order_by()

    def routed_here(self, approval_id: int) -> bool:
        return self.routed.filter(pk=approval_id).exists()


def _verdicts(asks: list[tuple[AccessCheck, RoutedCheck, int | None]]) -> list[tuple[int | None, bool]]:
    """For each socket (its access, its routing, the routed request's id or None): the close code or None,
    and whether the hint may go to it. One trip to the database thread for all of them."""
    codes = refusals([access for access, _, _ in asks])
    return [
        (code, code is None and (approval_id is None or routing.routed_here(approval_id)))
        for (_, routing, approval_id), code in zip(asks, codes, strict=True)
    ]


class _Batcher:
    """Runs together the checks of every socket of this process that one message reached.

    A group message reaches all of a process's sockets at the same moment, and each must be checked before
    it is forwarded. One by one that was a hop to the workers' one database thread, a connection taken from
    the pool (its health check a round trip) and a query per socket: 100 sockets queued 200 round trips on
    that thread. Here the sockets that ask while a batch is being gathered or run go in the next one, and a
    batch is one hop with a fixed number of statements. Every message is still checked against the
    database as it arrives; nothing is kept between messages."""

    GATHER_TICKS = 4  # loop iterations to let the other sockets the same message woke join the batch

    def __init__(self) -> None:
        self.waiting: list[tuple[AccessCheck, RoutedCheck, int | None, asyncio.Future]] = []
        self.runner: asyncio.Task | None = None

    async def verdict(self, access: AccessCheck, routing: RoutedCheck, approval_id: int | None):
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((access, routing, approval_id, future))
        if self.runner is None:
            self.runner = asyncio.ensure_future(self._run())
        return await future

    async def _run(self) -> None:
        batch: list = []
        try:
            while self.waiting:
                for _ in range(self.GATHER_TICKS):
                    await asyncio.sleep(0)
                batch, self.waiting = self.waiting, []
                try:
                    results = await database_sync_to_async(_verdicts)([ask[:3] for ask in batch])
                except Exception as exc:  # the database is down: each socket of the batch fails as alone it would
                    for *_, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (*_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        except BaseException:  # cancelled (the server stops): no socket waits for a batch that will not come
            for *_, future in [*batch, *self.waiting]:
                future.cancel()
            self.waiting = []
            raise
        finally:
            self.runner = None


_batchers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher]" = weakref.WeakKeyDictionary()


def _batcher() -> _Batcher:
    loop = asyncio.get_running_loop()
    if loop not in _batchers:
        _batchers[loop] = _Batcher()
    return _batchers[loop]


def _connect_check(user, session_key: str | None) -> tuple[AccessCheck, RoutedCheck]:
    return AccessCheck(session_key, user.pk, tenant_ids_for(user, Role.APPROVER)), RoutedCheck(user)


class ApprovalsConsumer(AsyncJsonWebsocketConsumer):
    """Joins one group per tenant in which the user is an approver; never another tenant's."""

    groups_joined: list[str]
    tenant_ids: set[int]
    claimed: set[int]

    GROUP_MESSAGES = ("approval.changed", "approval.claimed")

    async def dispatch(self, message: dict) -> None:
        """As channels' own, except that a tenant group's message goes straight to its handler. Channels
        first runs `aclose_old_connections()` (since 4.2), a hop to the workers' one database thread, for
        every message of every socket: a hint to 100 sockets queued 100 hops that did nothing, since this
        consumer reaches the database only through `database_sync_to_async`, which closes old connections
        itself, in that thread, around its one batch (`_Batcher`). The socket's own messages (connect,
        receive, disconnect) keep channels' way."""
        if message.get("type") in self.GROUP_MESSAGES:
            await getattr(self, get_handler_name(message))(message)
            return
        await super().dispatch(message)

    async def connect(self) -> None:
        self.groups_joined, self.tenant_ids, self.claimed = [], set(), set()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_LOGGED_IN)
            return
        session = self.scope.get("session")
        session_key = getattr(session, "session_key", None)
        self.access, self.routing = await database_sync_to_async(_connect_check)(user, session_key)
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

    async def _still_allowed(self, approval_id: int | None = None) -> bool:
        """Checked with every other socket of this process the same message reached (`_Batcher`): False, after
        closing the socket, if its access ended; False too if `approval_id`, a routed request, is not routed
        to its user (and not in a tenant they administer)."""
        code, forward = await _batcher().verdict(self.access, self.routing, approval_id)
        if code is None:
            return forward
        await self.disconnect(code)  # leave the groups now: nothing more is even delivered to this channel
        await self.close(code=code)
        return False

    async def approval_changed(self, event: dict) -> None:
        if not await self._still_allowed(event["approval_id"] if event.get("routed") else None):
            return
        await self.send_json(
            {
                "type": "approval.changed",
                "approval_id": event["approval_id"],
                "tenant": event["tenant"],
                "status": event["status"],
            }
        )

    async def approval_claimed(self, event: dict) -> None:
        if not await self._still_allowed(event["approval_id"] if event.get("routed") else None):
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
