"""API key authentication for agents (and personal access tokens for human approvers)."""

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import Q
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from console.models import Agent, PersonalAccessToken, TokenScope
from lib import clock


class KeyError401(exceptions.AuthenticationFailed):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(detail=message, code=code)


class TooManyBadKeys(exceptions.AuthenticationFailed):
    """429 for a wrong key from an address, or for a key lookup, that has sent too many wrong keys.

    Raised only after the key was checked and found wrong: a valid key always authenticates, even
    from an address that guessed, or while others guess at its lookup. An AuthenticationFailed, so that
    the plain-Django endpoints (events, OTLP) refuse it too; they answer its `status_code` and `wait`."""

    status_code = 429

    def __init__(self, wait: int) -> None:
        self.wait = wait
        super().__init__(
            detail=f"Too many invalid keys from this client or for this key; retry in {wait} s.",
            code="too_many_bad_keys",
        )


class MissingScope(exceptions.PermissionDenied):
    """403 for a personal access token used outside its scopes; `scope` names the one it lacks."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__(
            detail=f"This access token lacks the '{scope}' scope; create a token with it in the "
            "console (Access tokens).",
            code="insufficient_scope",
        )


class _BadKey(KeyError401):
    """A key that is malformed, or whose lookup or secret does not match: what a guesser sends."""

    def __init__(self, code: str, message: str, *, lookup: str = "") -> None:
        self.lookup = lookup
        super().__init__(code, message)


BAD_KEY_WINDOW = 60  # seconds; counters are per fixed minute


def _bad_key_counters(request, lookup: str) -> list[str]:
    """One counter for the client's address and, when the key had a lookup part, one for that lookup."""
    window = int(clock.time() // BAD_KEY_WINDOW)
    counters = [f"airlock:bad-keys:addr:{request.META.get('REMOTE_ADDR', '')}:{window}"]
    if lookup:
        counters.append(f"airlock:bad-keys:key:{lookup}:{window}")
    return counters


def _refuse_or_count_bad_key(request, lookup: str) -> None:
    """After a wrong key: 429 when its address or lookup is over the limit this minute, else count it."""
    counters = _bad_key_counters(request, lookup)
    if any((cache.get(counter) or 0) >= settings.AIRLOCK_BAD_KEYS_PER_MINUTE for counter in counters):
        raise TooManyBadKeys(wait=max(1, BAD_KEY_WINDOW - int(clock.time()) % BAD_KEY_WINDOW))
    for counter in counters:
        cache.add(counter, 0, timeout=2 * BAD_KEY_WINDOW)
        try:
            cache.incr(counter)
        except ValueError:  # expired between add and incr
            cache.set(counter, 1, timeout=2 * BAD_KEY_WINDOW)


@dataclass(frozen=True)
class AgentPrincipal:
    """What `request.user` is for an agent: authenticated, never staff, never a human."""

    agent: Agent
    is_authenticated: bool = True
    is_active: bool = True
    is_staff: bool = False
    is_superuser: bool = False
    is_agent: bool = True

    @property
    def pk(self) -> None:
        return None

    def __str__(self) -> str:
        return f"agent:{self.agent}"


def _split_key(raw: str, prefix: str) -> str:
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != prefix or len(parts[1]) != 12 or len(parts[2]) < 20:
        raise _BadKey("malformed_key", f"The bearer token is not an Airlock key ({prefix}_<lookup>_<secret>).")
    return parts[1]


def well_formed_agent_key(request) -> tuple[str, str] | None:
    """(lookup, full key) of a well-formed `Bearer ak_...` header, else None. Proves nothing yet."""
    header = authentication.get_authorization_header(request).decode("latin-1")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != AgentKeyAuthentication.keyword.lower() or not token.startswith("ak_") or " " in token:
        return None
    try:
        return _split_key(token, "ak"), token
    except _BadKey:
        return None


def key_lookup_is(lookup: str) -> Q:
    """Agents whose current key, or the previous key a rotation replaced, has this lookup."""
    return Q(key_lookup=lookup) | Q(previous_key_lookup=lookup)


def sign_in_agent(request: Request, agent: Agent, lookup: str) -> None:
    """Authenticate the request as `agent`, whose key (`lookup`) a caller has just checked against the row."""
    agent.presented_key_lookup = lookup
    agent.touch()
    request.user, request.auth = AgentPrincipal(agent=agent), agent


class AgentKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer ak_...` for agents, `Bearer pat_...` for approvers' personal tokens.

    Wrong keys are counted per address and per key lookup; past AIRLOCK_BAD_KEYS_PER_MINUTE the next
    wrong key gets 429 instead of 401. A right key is never refused for someone else's guessing."""

    keyword = "Bearer"
    accepts_revoked = False  # RevokedAgentMayReport: the one endpoint a revoked agent's genuine key still reaches

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        try:
            return self._authenticate_token(header)
        except _BadKey as exc:
            _refuse_or_count_bad_key(request, exc.lookup)
            raise

    def _authenticate_token(self, header: str):
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != self.keyword.lower() or not token or " " in token:
            raise _BadKey("malformed_key", "Use the header 'Authorization: Bearer <key>'.")
        if token.startswith("pat_"):
            return self._authenticate_personal_token(token)
        lookup = _split_key(token, "ak")
        agent = Agent.objects.select_related("tenant").filter(key_lookup_is(lookup)).first()
        standing = agent.key_standing(token, clock.now()) if agent is not None else "unknown"
        if standing == "unknown":
            raise _BadKey("unknown_key", "This API key is not known to Airlock.", lookup=f"ak_{lookup}")
        if agent.is_revoked and not self.accepts_revoked:
            raise KeyError401("revoked_key", "This API key was revoked; ask a tenant admin for a new one.")
        if standing == "expired":
            raise KeyError401(
                "replaced_key",
                f"This API key was replaced by a rotation and stopped working at "
                f"{agent.previous_key_expires_at:%Y-%m-%d %H:%M} UTC; use the agent's new key.",
            )
        agent.presented_key_lookup = lookup
        agent.touch()
        return AgentPrincipal(agent=agent), agent

    def _authenticate_personal_token(self, token: str):
        lookup = _split_key(token, "pat")
        pat = PersonalAccessToken.objects.select_related("user").filter(key_lookup=lookup).first()
        if pat is None or not pat.key_matches(token):
            raise _BadKey("unknown_key", "This access token is not known to Airlock.", lookup=f"pat_{lookup}")
        if pat.revoked_at is not None:
            raise KeyError401("revoked_key", "This access token was revoked.")
        if pat.is_expired:
            raise KeyError401(
                "expired_token",
                f"This access token expired at {pat.expires_at:%Y-%m-%d %H:%M} UTC; "
                "create a new one in the console (Access tokens).",
            )
        if not pat.user.is_active:
            raise KeyError401("revoked_key", "The user of this access token is inactive.")
        pat.touch()
        return pat.user, pat

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class RevokedAgentMayReport(AgentKeyAuthentication):
    """An agent's genuine key even after the agent was revoked, for reporting what it did before
    (`POST /api/v1/runs/{id}/local-calls`, runs.local_calls): revocation stops every decision, not the record
    of earlier ones. The endpoint flags anything decided after `revoked_at`."""

    accepts_revoked = True


class IsAgent(permissions.BasePermission):
    """Only an agent key may call agent-facing endpoints."""

    def has_permission(self, request: Request, view) -> bool:
        if request.user is None or not getattr(request.user, "is_authenticated", False):
            raise KeyError401("missing_key", "Send the agent's API key as 'Authorization: Bearer <key>'.")
        return isinstance(request.auth, Agent)


class IsHuman(permissions.BasePermission):
    """A logged-in person (session or personal access token), never an agent key.

    A personal access token needs the `read` scope for safe methods and `approve` for anything else."""

    def has_permission(self, request: Request, view) -> bool:
        if request.user is None or not getattr(request.user, "is_authenticated", False):
            raise exceptions.NotAuthenticated("Log in, or send a personal access token.")
        if not isinstance(request.user, get_user_model()):
            return False
        if isinstance(request.auth, PersonalAccessToken):
            needed = TokenScope.READ if request.method in permissions.SAFE_METHODS else TokenScope.APPROVE
            if not request.auth.has_scope(needed):
                raise MissingScope(needed.value)
        return True
