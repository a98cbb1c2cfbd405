"""API key authentication for agents (and personal access tokens for human approvers)."""

import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from console.models import Agent, PersonalAccessToken


class KeyError401(exceptions.AuthenticationFailed):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(detail=message, code=code)


class TooManyBadKeys(exceptions.AuthenticationFailed):
    """429 for a client that keeps sending unknown keys; the key is not even looked up.

    An AuthenticationFailed, so that the plain-Django endpoints (events, OTLP) refuse it too."""

    status_code = 429

    def __init__(self, wait: int) -> None:
        self.wait = wait
        super().__init__(detail=f"Too many invalid keys from this client; retry in {wait} s.", code="too_many_bad_keys")


def _bad_key_counter(request) -> str:
    window = int(time.time() // 60)
    return f"airlock:bad-keys:{request.META.get('REMOTE_ADDR', '')}:{window}"


def _refuse_if_guessing(request) -> None:
    limit = getattr(settings, "AIRLOCK_BAD_KEYS_PER_MINUTE", 30)
    if (cache.get(_bad_key_counter(request)) or 0) >= limit:
        raise TooManyBadKeys(wait=60 - int(time.time()) % 60)


def _count_bad_key(request) -> None:
    counter = _bad_key_counter(request)
    cache.add(counter, 0, timeout=120)
    try:
        cache.incr(counter)
    except ValueError:  # expired between add and incr
        cache.set(counter, 1, timeout=120)


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
        raise KeyError401("malformed_key", f"The bearer token is not an Airlock key ({prefix}_<lookup>_<secret>).")
    return parts[1]


class AgentKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer ak_...` for agents, `Bearer pat_...` for approvers' personal tokens."""

    keyword = "Bearer"

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        _refuse_if_guessing(request)
        try:
            return self._authenticate_token(header)
        except KeyError401:
            _count_bad_key(request)
            raise

    def _authenticate_token(self, header: str):
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != self.keyword.lower() or not token or " " in token:
            raise KeyError401("malformed_key", "Use the header 'Authorization: Bearer <key>'.")
        if token.startswith("pat_"):
            return self._authenticate_personal_token(token)
        lookup = _split_key(token, "ak")
        agent = Agent.objects.select_related("tenant").filter(key_lookup=lookup).first()
        if agent is None or not agent.key_matches(token):
            raise KeyError401("unknown_key", "This API key is not known to Airlock.")
        if agent.is_revoked:
            raise KeyError401("revoked_key", "This API key was revoked; ask a tenant admin for a new one.")
        agent.touch()
        return AgentPrincipal(agent=agent), agent

    def _authenticate_personal_token(self, token: str):
        lookup = _split_key(token, "pat")
        pat = PersonalAccessToken.objects.select_related("user").filter(key_lookup=lookup).first()
        if pat is None or not pat.key_matches(token):
            raise KeyError401("unknown_key", "This access token is not known to Airlock.")
        if pat.revoked_at is not None:
            raise KeyError401("revoked_key", "This access token was revoked.")
        if not pat.user.is_active:
            raise KeyError401("revoked_key", "The user of this access token is inactive.")
        pat.touch()
        return pat.user, pat

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class IsAgent(permissions.BasePermission):
    """Only an agent key may call agent-facing endpoints."""

    def has_permission(self, request: Request, view) -> bool:
        if request.user is None or not getattr(request.user, "is_authenticated", False):
            raise KeyError401("missing_key", "Send the agent's API key as 'Authorization: Bearer <key>'.")
        return isinstance(request.auth, Agent)


class IsHuman(permissions.BasePermission):
    """A logged-in person (session or personal access token), never an agent key."""

    def has_permission(self, request: Request, view) -> bool:
        if request.user is None or not getattr(request.user, "is_authenticated", False):
            raise exceptions.NotAuthenticated("Log in, or send a personal access token.")
        return isinstance(request.user, get_user_model())
